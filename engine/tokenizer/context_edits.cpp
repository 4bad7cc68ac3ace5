#include "engine/tokenizer/context_edits.hpp"

#include "base/json_text.hpp"

#include <simdjson.h>

#include <algorithm>
#include <map>

namespace troupe {

auto clear_thinking(std::vector<chat_message>& messages, std::int32_t keep) -> std::int32_t {
  if (keep < 0) return 0;
  std::int32_t seen = 0, cleared = 0;
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->role != "assistant" || it->reasoning_content.empty()) continue;
    if (seen++ < keep) continue;
    it->reasoning_content.clear();
    ++cleared;
  }
  return cleared;
}

namespace {

/// The string at `v`, "" when it is none.
auto text_at(simdjson::simdjson_result<simdjson::dom::element> v) -> std::string_view {
  std::string_view s;
  return v.get_string().get(s) == simdjson::SUCCESS ? s : std::string_view{};
}

/// An assistant's tool calls: each call's id and name, in order.
auto call_names(const std::string& calls_json) -> std::vector<std::pair<std::string, std::string>> {
  std::vector<std::pair<std::string, std::string>> out;
  simdjson::dom::parser parser;
  simdjson::dom::array calls;
  if (parser.parse(calls_json).get_array().get(calls)) return out;
  for (auto call : calls) {
    const std::string_view id = text_at(call["id"]), name = text_at(call["function"]["name"]);
    out.emplace_back(std::string(id), std::string(name));
  }
  return out;
}

/// The calls again, the arguments of those in `ids` emptied ({}).
auto without_inputs(const std::string& calls_json, const std::vector<std::string>& ids) -> std::string {
  simdjson::dom::parser parser;
  simdjson::dom::array calls;
  if (parser.parse(calls_json).get_array().get(calls)) return calls_json;
  std::string out = "[";
  for (auto call : calls) {
    const std::string_view id = text_at(call["id"]);
    if (out.size() > 1) out += ',';
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
      out += simdjson::minify(call);
      continue;
    }
    const std::string_view name = text_at(call["function"]["name"]);
    out += R"({"id":)";
    json_text::append_string(out, id);
    out += R"(,"type":"function","function":{"name":)";
    json_text::append_string(out, name);
    out += R"(,"arguments":{}}})";
  }
  return out + "]";
}

} // namespace

auto clear_tool_uses(std::vector<chat_message>& messages, const context_edits& edits) -> std::int32_t {
  std::map<std::string, std::string> names; // call id -> tool name
  for (const auto& m : messages)
    if (m.role == "assistant" && !m.tool_calls_json.empty())
      for (auto& [id, name] : call_names(m.tool_calls_json)) names[id] = name;
  const auto excluded = [&](const chat_message& m) {
    const auto it = names.find(m.tool_call_id);
    return it != names.end() && std::find(edits.exclude_tools.begin(), edits.exclude_tools.end(), it->second) !=
                                    edits.exclude_tools.end();
  };
  std::vector<std::size_t> results; // the tool results that may go, oldest first
  for (std::size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "tool" && messages[i].content != cleared_tool_result && !excluded(messages[i]))
      results.push_back(i);
  const auto keep = static_cast<std::size_t>(std::max(0, edits.keep_tool_uses));
  if (results.size() <= keep) return 0;
  results.resize(results.size() - keep);
  std::vector<std::string> ids;
  for (auto i : results) {
    messages[i].content = std::string(cleared_tool_result);
    ids.push_back(messages[i].tool_call_id);
  }
  if (edits.clear_tool_inputs)
    for (auto& m : messages)
      if (m.role == "assistant" && !m.tool_calls_json.empty()) m.tool_calls_json = without_inputs(m.tool_calls_json, ids);
  return static_cast<std::int32_t>(results.size());
}

} // namespace troupe
