#include "service/http/anthropic/anthropic_api.hpp"

#include "base/json_text.hpp"
#include "service/http/anthropic/anthropic_fields.hpp"
#include "service/http/json_reader.hpp"
#include "service/http/structured_output.hpp"
#include "service/http/tool_fields.hpp"

#include <algorithm>

namespace troupe::api::anthropic {

namespace {

using namespace json_reader;
using namespace fields;

/// A block's text list: a string, or [{"type": "text", "text"}...] joined.
auto read_text(od::value& v, const std::string& path, std::string& out) -> problem {
  return read_text_parts(v, path, path, {"text"}, out);
}

/// A tool_result's content: a string, or text and tool_reference blocks (a
/// tool search's answer: the deferred tools it names are offered from then on).
auto read_result(od::value& v, const std::string& path, std::string& out, std::vector<std::string>& referenced)
    -> problem {
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t == od::json_type::string) return read_string(v, path, path, out);
  od::array blocks;
  if (auto e = v.get_array().get(blocks)) return failed(e, path, path, "a string or an array of blocks");
  std::size_t i = 0;
  for (auto item : blocks) {
    const auto at = path + "[" + std::to_string(i++) + "]";
    od::object b;
    if (auto e = item.get_object().get(b)) return failed(e, at, at, "a content block");
    std::string type, text, tool_name;
    if (auto p = for_each_field(b, [&](std::string_view k, od::value& x) -> problem {
          const auto f = at + "." + std::string(k);
          if (k == "type") return read_string(x, f, f, type);
          if (k == "text") return read_string(x, f, f, text);
          if (k == "tool_name") return read_string(x, f, f, tool_name);
          return check_json(x, 1); // cache_control, citations
        }))
      return p;
    if (type == "text") out += text;
    else if (type == "tool_reference") referenced.push_back(tool_name);
    else
      return error("invalid_value", at + ".type",
                   at + ".type \"" + type + "\" is not supported in a tool result (text and tool_reference are)");
  }
  return {};
}

/// One message, as chat messages: a user's tool results first (tool
/// messages), then its text; an assistant's text, thinking and tool uses.
auto read_message(od::object& m, const std::string& path, std::vector<chat_message>& out,
                  std::vector<std::string>& referenced, std::string& effort) -> problem {
  std::string role;
  bool has_content = false;
  chat_message text_message;
  std::vector<chat_message> results;
  std::string calls;
  std::size_t num_calls = 0;
  if (auto p = for_each_field(m, [&](std::string_view key, od::value& v) -> problem {
        if (key == "role") return read_string(v, path + ".role", path + ".role", role);
        if (key == "output_config") return read_message_config(v, path + ".output_config", effort);
        if (key != "content") return error("unknown_parameter", path + "." + std::string(key),
                                           "unknown parameter " + path + "." + std::string(key));
        has_content = true;
        od::json_type t;
        if (auto e = v.type().get(t)) return bad_json(e);
        if (t == od::json_type::string) return read_string(v, path + ".content", path + ".content", text_message.content);
        od::array blocks;
        if (auto e = v.get_array().get(blocks)) return failed(e, path + ".content", path + ".content", "a string or an array of blocks");
        std::size_t i = 0;
        for (auto item : blocks) {
          const auto at = path + ".content[" + std::to_string(i++) + "]";
          od::object b;
          if (auto e = item.get_object().get(b)) return failed(e, at, at, "a content block");
          std::string type, text, id, name, input, thinking, tool_use_id, signature;
          bool is_error = false, has_input = false;
          chat_message result;
          if (auto p = for_each_field(b, [&](std::string_view k, od::value& x) -> problem {
                const auto f = at + "." + std::string(k);
                if (k == "type") return read_string(x, f, f, type);
                if (k == "text") return read_string(x, f, f, text);
                if (k == "id") return read_string(x, f, f, id);
                if (k == "name") return read_string(x, f, f, name);
                if (k == "input") {
                  has_input = true;
                  return read_raw_object(x, f, f, input);
                }
                if (k == "thinking") return read_string(x, f, f, thinking);
                if (k == "tool_use_id") return read_string(x, f, f, tool_use_id);
                if (k == "content") return read_result(x, f, result.content, referenced);
                if (k == "is_error") return read_bool(x, f, is_error);
                if (k == "signature") return read_string(x, f, f, signature);
                return check_json(x, 1); // cache_control, citations
              }))
            return p;
          if (type == "text") {
            text_message.content += text;
          } else if (type == "thinking") {
            // Shown thinking is its text; omitted thinking is in its signature (sealed).
            text_message.reasoning_content += thinking;
            if (thinking.empty() && !signature.empty()) // (several blocks: one sealed text a line)
              text_message.reasoning_sealed += (text_message.reasoning_sealed.empty() ? "" : "\n") + signature;
          } else if (type == "redacted_thinking") {
            // Opaque to any model but Anthropic's: left out.
          } else if (type == "tool_use") {
            if (name.empty()) return error("missing_field", at + ".name", at + ".name is missing");
            if (!has_input) return error("missing_field", at + ".input", at + ".input is missing");
            calls += (num_calls++ ? "," : "") + std::string("{\"id\":") + json_text::quoted(id) +
                     ",\"type\":\"function\",\"function\":{\"name\":" + json_text::quoted(name) + ",\"arguments\":" + input + "}}";
          } else if (type == "tool_result") {
            if (tool_use_id.empty()) return error("missing_field", at + ".tool_use_id", at + ".tool_use_id is missing");
            result.role = "tool";
            result.tool_call_id = tool_use_id;
            if (is_error) result.content = "Error: " + result.content;
            results.push_back(std::move(result));
          } else {
            return error("invalid_value", at + ".type",
                         at + ".type \"" + type + "\" is not supported (text, thinking, tool_use and tool_result are)");
          }
        }
        return {};
      }))
    return p;
  if (role != "user" && role != "assistant" && role != "system")
    return error("invalid_value", path + ".role",
                 path + ".role must be \"user\", \"assistant\" or \"system\", got \"" + role + "\"");
  if (!has_content) return error("missing_field", path + ".content", path + ".content is missing");
  if (role == "system") { // Claude Code's mid-conversation instructions: a system message in place
    if (num_calls || !results.empty() || !text_message.reasoning_content.empty())
      return error("invalid_value", path + ".content", "a system message holds text blocks only");
    text_message.role = "system";
    out.push_back(std::move(text_message));
    return {};
  }
  if (role == "user") {
    if (num_calls) return error("invalid_value", path + ".content", "tool_use blocks are for assistant messages");
    for (auto& r : results) out.push_back(std::move(r));
    if (!text_message.content.empty() || results.empty()) {
      text_message.role = "user";
      out.push_back(std::move(text_message));
    }
    return {};
  }
  if (!results.empty()) return error("invalid_value", path + ".content", "tool_result blocks are for user messages");
  text_message.role = "assistant";
  if (num_calls) {
    text_message.tool_calls_json = "[" + calls + "]";
    text_message.null_content = text_message.content.empty();
  }
  out.push_back(std::move(text_message));
  return {};
}

auto read_tool_choice(od::value& v, generation_request& r) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, "tool_choice", "tool_choice", "an object");
  std::string type;
  bool no_parallel = false;
  if (auto p = for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
        if (k == "type") return read_string(x, "tool_choice", "tool_choice.type", type);
        if (k == "name") return read_string(x, "tool_choice", "tool_choice.name", r.choice.name);
        if (k == "disable_parallel_tool_use") return read_bool(x, "tool_choice", no_parallel);
        return error("unknown_parameter", "tool_choice", "unknown parameter tool_choice." + std::string(k));
      }))
    return p;
  r.parallel_tool_calls = !no_parallel;
  if (type == "auto") r.choice.what = tool_choice::mode::automatic;
  else if (type == "any") r.choice.what = tool_choice::mode::required;
  else if (type == "tool") r.choice.what = tool_choice::mode::named;
  else if (type == "none") r.choice.what = tool_choice::mode::none;
  else return error("invalid_value", "tool_choice", "tool_choice.type must be auto, any, tool or none, got \"" + type + "\"");
  if (r.choice.what == tool_choice::mode::named && r.choice.name.empty())
    return error("missing_field", "tool_choice", "tool_choice.name is missing");
  return {};
}

/// The tools offered: those not deferred, and the deferred ones a
/// tool_reference names; hosted (server) tools skipped.
auto settle_tools(tool_fields::flat_tools& tools, generation_request& r) -> std::optional<api_error> {
  for (const auto& t : tools.tools)
    if (t.deferred) r.deferred_tools.push_back(t.name);
  r.skipped_tools = std::move(tools.skipped);
  if (!tools.tools.empty()) r.tools_json = tool_fields::chat_tools_json(tools.tools, r.referenced_tools);
  return std::nullopt;
}

/// What the body said besides the request itself, settled once every field is read.
struct body_fields {
  bool has_messages = false, has_max_tokens = false, has_choice = false;
  thinking_config thinking;
  std::string message_effort; // (a message's output_config.effort, the latest)
  output_constraint constraint;
  tool_fields::flat_tools tools;
  std::string system;
  std::vector<chat_message> messages;
};

/// One field of the body, into the request or `b`.
auto read_field(std::string_view key, od::value& v, generation_request& r, body_fields& b) -> problem {
  if (key == "model") return read_string(v, key, key, r.model);
  if (key == "max_tokens") {
    b.has_max_tokens = true;
    return read_int(v, key, 1, int32_max, r.max_tokens.emplace());
  }
  if (key == "messages") {
    b.has_messages = true;
    od::array items;
    if (auto e = v.get_array().get(items)) return failed(e, key, key, "an array of messages");
    std::size_t i = 0;
    for (auto item : items) {
      const auto at = "messages[" + std::to_string(i++) + "]";
      od::object m;
      if (auto e = item.get_object().get(m)) return failed(e, at, at, "a message");
      if (auto p = read_message(m, at, b.messages, r.referenced_tools, b.message_effort)) return p;
    }
    if (i == 0) return error("invalid_value", "messages", "messages must not be empty");
    return {};
  }
  if (key == "system") return read_text(v, "system", b.system);
  if (key == "stop_sequences") {
    od::array items;
    if (auto e = v.get_array().get(items)) return failed(e, key, key, "an array of strings");
    for (auto item : items) {
      od::value x;
      if (auto e = item.get(x)) return bad_json(e);
      if (auto p = read_string(x, key, key, r.sampling.stop.emplace_back())) return p;
      if (r.sampling.stop.back().empty()) return error("invalid_value", "stop_sequences", "a stop sequence must not be empty");
    }
    return {};
  }
  if (key == "stream") return read_bool(v, key, r.stream);
  if (key == "temperature") return read_float(v, key, r.sampling.temperature);
  if (key == "top_p") return read_float(v, key, r.sampling.top_p);
  if (key == "top_k") return read_int(v, key, int32_min, int32_max, r.sampling.top_k);
  if (key == "tools") return tool_fields::read_flat_tools(v, tool_fields::messages_tools, r.tools, b.tools);
  if (key == "tool_choice") {
    b.has_choice = true;
    return read_tool_choice(v, r);
  }
  if (key == "metadata") {
    od::object o;
    if (auto e = v.get_object().get(o)) return failed(e, key, key, "an object");
    return for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
      if (k == "user_id") return read_string(x, key, "metadata.user_id", r.user);
      return error("unknown_parameter", "metadata", "unknown parameter metadata." + std::string(k));
    });
  }
  if (key == "thinking") return read_thinking(v, b.thinking);
  if (key == "output_config") return read_output_config(v, b.thinking, b.constraint);
  if (key == "context_management") return read_context_management(v, r.edits);
  if (auto p = check_json(v, 1)) return p;
  r.unknown_fields.emplace_back(key);
  return {};
}

/// `b` settled into the request, and the checks that need the whole request.
auto finish(body_fields& b, bool counting, generation_request& r) -> problem {
  if (!b.has_messages) return error("missing_field", "messages", "messages is missing");
  if (!b.has_max_tokens && !counting) return error("missing_field", "max_tokens", "max_tokens is missing");
  if (!b.has_max_tokens) r.max_tokens = int32_max; // (count_tokens: no answer, so no limit on it)
  if (!b.system.empty()) r.messages.push_back({"system", b.system});
  for (auto& m : b.messages) r.messages.push_back(std::move(m));
  r.sampling.max_tokens = *r.max_tokens;
  if (!b.message_effort.empty()) b.thinking.effort = b.message_effort;
  if (auto p = settle_thinking(b.thinking, r)) return *p;
  if (auto p = settle_tools(b.tools, r)) return *p;
  auto g = constraint_grammar(b.constraint);
  if (auto* e = std::get_if<api_error>(&g)) return *e;
  r.sampling.grammar = std::move(std::get<std::string>(g));
  if (r.sampling.thinking_budget >= *r.max_tokens)
    return error("invalid_value", "thinking.budget_tokens",
                 "thinking.budget_tokens must be less than max_tokens (" + std::to_string(*r.max_tokens) + "), got " +
                     std::to_string(r.sampling.thinking_budget));
  if (r.tools.empty()) {
    if (b.has_choice && r.choice.what != tool_choice::mode::none)
      return error("invalid_value", "tool_choice", "tool_choice needs tools");
    r.choice.what = tool_choice::mode::none;
  } else if (r.choice.what == tool_choice::mode::named &&
             std::none_of(r.tools.begin(), r.tools.end(), [&](const tool_spec& t) { return t.name == r.choice.name; })) {
    return error("invalid_value", "tool_choice", "tool_choice names \"" + r.choice.name + "\", which is not among the tools");
  }
  if (auto e = check_sampling(r.sampling)) return *e;
  return {};
}

} // namespace

auto parse_request(std::string_view body, const sampling_params& defaults, message_options* options, bool counting)
    -> std::variant<generation_request, api_error> {
  generation_request r;
  r.kind = endpoint::chat;
  r.thinking_param = "thinking.budget_tokens";
  r.thinking_implied = true;
  r.sampling = defaults;
  body_fields b;
  if (auto p = read_object(body, "request body",
                           [&](std::string_view key, od::value& v) { return read_field(key, v, r, b); }))
    return *p;
  if (auto p = finish(b, counting, r)) return *p;
  if (options) options->omit_thinking = b.thinking.omit;
  return r;
}

auto error_body(const api_error& e) -> std::string {
  // Anthropic's error types by status, as its API names them.
  std::string type = e.type;
  if (e.status == 401) type = "authentication_error";
  else if (e.status == 403) type = "permission_error";
  else if (e.status == 404) type = "not_found_error";
  else if (e.status == 413) type = "request_too_large";
  else if (e.status == 429) type = "rate_limit_error";
  else if (e.status >= 500) type = e.status == 529 ? "overloaded_error" : "api_error";
  else type = "invalid_request_error";
  std::string out = R"({"type":"error","error":{"type":)";
  json_text::append_string(out, type);
  out += R"(,"message":)";
  json_text::append_string(out, e.message);
  return out + "}}";
}

auto stop_reason(std::string_view finish_reason, bool stop_string) -> std::string_view {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  return stop_string ? "stop_sequence" : "end_turn";
}

auto tool_input(std::string_view arguments) -> std::string {
  // The parser gives the arguments' JSON text; a model may leave it broken.
  std::size_t i = 0;
  while (i < arguments.size() && (arguments[i] == ' ' || arguments[i] == '\n' || arguments[i] == '\t')) ++i;
  if (i == arguments.size() || arguments[i] != '{') return "{}";
  static thread_local simdjson::dom::parser parser;
  const simdjson::padded_string text(arguments);
  auto doc = parser.parse(text);
  if (doc.error() || !doc.value().is_object()) return "{}";
  return simdjson::minify(doc.value());
}

auto usage_json(const usage& u, bool with_output) -> std::string {
  // input_tokens counts what was neither read from the cache nor written to it.
  const auto fresh = std::max<std::int64_t>(0, u.prompt_tokens - u.cached_tokens - u.cache_written_tokens);
  std::string out = R"({"input_tokens":)" + std::to_string(fresh) + R"(,"cache_creation_input_tokens":)" +
                    std::to_string(u.cache_written_tokens) + R"(,"cache_read_input_tokens":)" +
                    std::to_string(u.cached_tokens);
  if (with_output) out += R"(,"output_tokens":)" + std::to_string(u.completion_tokens);
  return out + "}";
}

auto applied_edits_json(const std::vector<applied_edit>& edits) -> std::string {
  std::string out = R"({"applied_edits":[)";
  for (const auto& e : edits) {
    if (out.back() != '[') out += ',';
    out += e.thinking ? R"({"type":"clear_thinking_20251015","cleared_thinking_turns":)"
                      : R"({"type":"clear_tool_uses_20250919","cleared_tool_uses":)";
    out += std::to_string(e.cleared) + R"(,"cleared_input_tokens":)" + std::to_string(e.cleared_tokens) + "}";
  }
  return out + "]}";
}

auto tool_use_id(std::string_view call_id) -> std::string {
  return "toolu_" + std::string(call_id.starts_with("call_") ? call_id.substr(5) : call_id);
}

auto message(const response_head& h, std::string_view text, std::string_view reasoning,
             const std::vector<tools::tool_call>& calls, std::string_view finish_reason, std::string_view stop_sequence,
             const usage& u, const thinking_output& t) -> std::string {
  std::string out = R"({"id":)";
  json_text::append_string(out, "msg_" + h.id);
  out += R"(,"type":"message","role":"assistant","model":)";
  json_text::append_string(out, h.model);
  out += R"(,"content":[)";
  bool first = true;
  const auto sep = [&] {
    if (!first) out += ',';
    first = false;
  };
  if (!reasoning.empty()) {
    sep();
    out += R"({"type":"thinking","thinking":)";
    json_text::append_string(out, t.omit ? std::string_view{} : reasoning);
    out += R"(,"signature":)";
    json_text::append_string(out, t.seal ? t.seal->seal(reasoning) : std::string());
    out += '}';
  }
  if (!text.empty() || (calls.empty() && reasoning.empty())) { // (an empty answer: one empty text block)
    sep();
    out += R"({"type":"text","text":)";
    json_text::append_string(out, text);
    out += '}';
  }
  for (const auto& c : calls) {
    sep();
    out += R"({"type":"tool_use","id":)";
    json_text::append_string(out, tool_use_id(c.id));
    out += R"(,"name":)";
    json_text::append_string(out, c.name);
    out += R"(,"input":)" + tool_input(c.arguments) + "}";
  }
  out += R"(],"stop_reason":)";
  json_text::append_string(out, stop_reason(finish_reason, !stop_sequence.empty()));
  out += R"(,"stop_sequence":)";
  if (stop_sequence.empty()) out += "null";
  else json_text::append_string(out, stop_sequence);
  out += R"(,"usage":)" + usage_json(u, true);
  if (t.edits) out += R"(,"context_management":)" + applied_edits_json(*t.edits);
  return out + "}";
  return out;
}

} // namespace troupe::api::anthropic
