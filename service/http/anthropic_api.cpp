#include "service/http/anthropic_api.hpp"

#include "engine/core/json_text.hpp"
#include "service/http/json_reader.hpp"
#include "service/http/structured_output.hpp"
#include "service/http/tool_fields.hpp"

#include <algorithm>

namespace troupe::api::anthropic {

namespace {

using namespace json_reader;

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
                  std::vector<std::string>& referenced) -> problem {
  std::string role;
  bool has_content = false;
  chat_message text_message;
  std::vector<chat_message> results;
  std::string calls;
  std::size_t num_calls = 0;
  if (auto p = for_each_field(m, [&](std::string_view key, od::value& v) -> problem {
        if (key == "role") return read_string(v, path + ".role", path + ".role", role);
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
            if (thinking.empty()) text_message.reasoning_sealed += signature;
          } else if (type == "redacted_thinking") {
            // Opaque to any model but Anthropic's: left out.
          } else if (type == "tool_use") {
            if (name.empty()) return error("missing_field", at + ".name", at + ".name is missing");
            if (!has_input) return error("missing_field", at + ".input", at + ".input is missing");
            calls += (num_calls++ ? "," : "") + std::string("{\"id\":") + json_string(id) +
                     ",\"type\":\"function\",\"function\":{\"name\":" + json_string(name) + ",\"arguments\":" + input + "}}";
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

auto read_tool_choice(od::value& v, completion_request& r) -> problem {
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

/// thinking and output_config.effort, as read; settled once both are.
struct thinking_config {
  std::string type;                  ///< enabled, adaptive, disabled; "" when absent
  std::optional<std::int32_t> budget; ///< budget_tokens
  std::string effort;                ///< output_config.effort
};

/// thinking: {"type": "enabled", "budget_tokens"} | {"type": "adaptive"} |
/// {"type": "disabled"}, with "display": "summarized" | "omitted".
auto read_thinking(od::value& v, completion_request& r, thinking_config& t) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, "thinking", "thinking", "an object");
  std::string display;
  if (auto p = for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
        if (k == "type") return read_string(x, "thinking", "thinking.type", t.type);
        if (k == "budget_tokens") return read_int(x, "thinking.budget_tokens", 1, int32_max, t.budget.emplace());
        if (k == "display") return read_string(x, "thinking", "thinking.display", display);
        return error("unknown_parameter", "thinking", "unknown parameter thinking." + std::string(k));
      }))
    return p;
  if (t.type != "enabled" && t.type != "adaptive" && t.type != "disabled")
    return error("invalid_value", "thinking", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"");
  if (t.type == "enabled" && !t.budget)
    return error("missing_field", "thinking.budget_tokens", "thinking.budget_tokens is missing");
  if (!display.empty() && display != "summarized" && display != "omitted")
    return error("invalid_value", "thinking.display", "thinking.display must be \"summarized\" or \"omitted\"");
  r.anthropic.omit_thinking = display == "omitted";
  return {};
}

/// output_config: {"effort": low | medium | high | xhigh | max, "format":
/// {"type": "json_schema", "schema"}}.
auto read_output_config(od::value& v, thinking_config& t, output_constraint& c) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, "output_config", "output_config", "an object");
  return for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
    if (k == "effort") {
      if (auto p = read_string(x, "output_config.effort", "output_config.effort", t.effort)) return p;
      for (const auto* e : {"low", "medium", "high", "xhigh", "max"})
        if (t.effort == e) return problem{};
      return error("invalid_value", "output_config.effort", "output_config.effort must be low, medium, high, xhigh or max");
    }
    if (k != "format") return error("unknown_parameter", "output_config", "unknown parameter output_config." + std::string(k));
    od::object f;
    if (auto e = x.get_object().get(f)) return failed(e, "output_config.format", "output_config.format", "an object");
    std::string type;
    if (auto p = for_each_field(f, [&](std::string_view fk, od::value& y) -> problem {
          const auto at = "output_config.format." + std::string(fk);
          if (fk == "type") return read_string(y, at, at, type);
          if (fk == "schema") return read_raw_object(y, at, at, c.text);
          return error("unknown_parameter", at, "unknown parameter " + at);
        }))
      return p;
    if (type != "json_schema")
      return error("invalid_value", "output_config.format.type", "output_config.format.type must be \"json_schema\"");
    if (c.text.empty()) return error("missing_field", "output_config.format.schema", "output_config.format.schema is missing");
    c.what = output_constraint::kind::json_schema;
    c.param = "output_config.format.schema";
    return {};
  });
}

/// {"type": "input_tokens" | "tool_uses" | "thinking_turns", "value": n}.
auto read_count(od::value& v, const std::string& at, std::string_view unit, std::int64_t& out) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, at, at, "an object");
  std::string type;
  if (auto p = for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
        if (k == "type") return read_string(x, at, at + ".type", type);
        if (k == "value") return read_int(x, at + ".value", 0, int32_max, out);
        return error("unknown_parameter", at, "unknown parameter " + at + "." + std::string(k));
      }))
    return p;
  if (type != unit) return error("invalid_value", at, at + ".type must be \"" + std::string(unit) + "\"");
  return {};
}

/// An array of strings.
auto read_strings(od::value& v, const std::string& at, std::vector<std::string>& out) -> problem {
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, at, at, "an array of strings");
  for (auto item : items) {
    od::value x;
    if (auto e = item.get(x)) return bad_json(e);
    if (auto p = read_string(x, at, at, out.emplace_back())) return p;
  }
  return {};
}

/// One clear_tool_uses_20250919 edit's fields.
auto read_tool_uses_edit(std::string_view k, od::value& x, const std::string& f, context_edits& e) -> problem {
  std::int64_t n = 0;
  problem p;
  if (k == "trigger") p = read_count(x, f, "input_tokens", e.trigger_tokens);
  else if (k == "keep") (p = read_count(x, f, "tool_uses", n)), e.keep_tool_uses = static_cast<std::int32_t>(n);
  else if (k == "clear_at_least") p = read_count(x, f, "input_tokens", e.clear_at_least);
  else if (k == "clear_tool_inputs") p = read_bool(x, f, e.clear_tool_inputs);
  else if (k == "exclude_tools") p = read_strings(x, f, e.exclude_tools);
  else p = error("unknown_parameter", f, "unknown parameter " + f);
  return p;
}

/// context_management: {"edits": [clear_thinking_20251015 {keep: "all" |
/// {thinking_turns}}, clear_tool_uses_20250919 {trigger, keep,
/// clear_at_least, exclude_tools, clear_tool_inputs}]}.
auto read_context_management(od::value& v, context_edits& e) -> problem {
  od::object o;
  if (auto err = v.get_object().get(o)) return failed(err, "context_management", "context_management", "an object");
  return for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
    if (k != "edits") return error("unknown_parameter", "context_management", "unknown parameter context_management." + std::string(k));
    od::array edits;
    if (auto err = x.get_array().get(edits)) return failed(err, "context_management.edits", "context_management.edits", "an array");
    std::size_t i = 0;
    for (auto item : edits) {
      const auto at = "context_management.edits[" + std::to_string(i++) + "]";
      od::object edit;
      if (auto err = item.get_object().get(edit)) return failed(err, at, at, "an edit");
      std::string type;
      context_edits one;
      if (auto p = for_each_field(edit, [&](std::string_view ek, od::value& y) -> problem {
            const auto f = at + "." + std::string(ek);
            if (ek == "type") return read_string(y, f, f, type);
            if (ek == "keep" && type == "clear_thinking_20251015") {
              od::json_type t;
              if (auto err = y.type().get(t)) return bad_json(err);
              std::string all;
              if (t == od::json_type::string) {
                if (auto p = read_string(y, f, f, all)) return p;
                one.keep_thinking_turns = -1;
                return all == "all" ? problem{} : error("invalid_value", f, f + " must be \"all\" or {\"type\": \"thinking_turns\", \"value\": n}");
              }
              std::int64_t n = 1;
              auto p = read_count(y, f, "thinking_turns", n);
              one.keep_thinking_turns = static_cast<std::int32_t>(n);
              return p;
            }
            if (type == "clear_tool_uses_20250919") return read_tool_uses_edit(ek, y, f, one);
            return error("unknown_parameter", f, "unknown parameter " + f + " (type must come first)");
          }))
        return p;
      if (type == "clear_thinking_20251015" && !e.clear_thinking) {
        e.clear_thinking = true;
        e.keep_thinking_turns = one.keep_thinking_turns;
        e.thinking_first = !e.clear_tool_uses;
      } else if (type == "clear_tool_uses_20250919" && !e.clear_tool_uses) {
        const bool thinking = e.clear_thinking, first = e.thinking_first;
        const auto keep = e.keep_thinking_turns;
        e = one;
        e.clear_tool_uses = true;
        e.clear_thinking = thinking;
        e.thinking_first = first;
        e.keep_thinking_turns = keep;
      } else {
        return error("invalid_value", at + ".type",
                     at + ".type must be clear_thinking_20251015 or clear_tool_uses_20250919, each once, got \"" + type + "\"");
      }
    }
    return problem{};
  });
}

/// thinking and output_config.effort, read: the template's thinking off
/// (disabled), or on with a budget: budget_tokens, else the effort's (low
/// 1,024, medium 2,048, high 8,192, xhigh 16,384 tokens, max none: as
/// reasoning.effort's) when it is below max_tokens.
auto settle_thinking(const thinking_config& t, completion_request& r) -> std::optional<api_error> {
  if (t.type == "disabled") {
    r.template_kwargs_json = R"({"enable_thinking":false})";
    return std::nullopt;
  }
  if (t.type == "enabled") {
    r.sampling.thinking_budget = *t.budget;
    return std::nullopt;
  }
  const std::int32_t budget = t.effort == "low"      ? 1024
                              : t.effort == "medium" ? 2048
                              : t.effort == "high"   ? 8192
                              : t.effort == "xhigh"  ? 16384
                                                     : -1;
  if (budget > 0 && budget < *r.max_tokens) r.sampling.thinking_budget = budget;
  return std::nullopt;
}

/// The tools offered: those not deferred, and the deferred ones a
/// tool_reference names; hosted (server) tools skipped.
auto settle_tools(tool_fields::flat_tools& tools, completion_request& r) -> std::optional<api_error> {
  for (const auto& t : tools.tools)
    if (t.deferred) r.anthropic.deferred_tools.push_back(t.name);
  r.skipped_tools = std::move(tools.skipped);
  if (!tools.tools.empty()) r.tools_json = tool_fields::chat_tools_json(tools.tools, r.anthropic.referenced_tools);
  return std::nullopt;
}

} // namespace

auto parse_request(std::string_view body, const sampling_params& defaults, bool counting)
    -> std::variant<completion_request, api_error> {
  completion_request r;
  r.kind = endpoint::chat;
  r.wire = wire::anthropic;
  r.sampling = defaults;
  bool has_messages = false, has_max_tokens = false, has_choice = false;
  thinking_config thinking;
  output_constraint constraint;
  tool_fields::flat_tools tools;
  std::string system;
  std::vector<chat_message> messages;
  if (auto p = read_object(body, "request body", [&](std::string_view key, od::value& v) -> problem {
        if (key == "model") return read_string(v, key, key, r.model);
        if (key == "max_tokens") {
          has_max_tokens = true;
          return read_int(v, key, 1, int32_max, r.max_tokens.emplace());
        }
        if (key == "messages") {
          has_messages = true;
          od::array items;
          if (auto e = v.get_array().get(items)) return failed(e, key, key, "an array of messages");
          std::size_t i = 0;
          for (auto item : items) {
            const auto at = "messages[" + std::to_string(i++) + "]";
            od::object m;
            if (auto e = item.get_object().get(m)) return failed(e, at, at, "a message");
            if (auto p = read_message(m, at, messages, r.anthropic.referenced_tools)) return p;
          }
          if (i == 0) return error("invalid_value", "messages", "messages must not be empty");
          return {};
        }
        if (key == "system") return read_text(v, "system", system);
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
        if (key == "tools") return tool_fields::read_flat_tools(v, tool_fields::messages_tools, r.tools, tools);
        if (key == "tool_choice") {
          has_choice = true;
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
        if (key == "thinking") return read_thinking(v, r, thinking);
        if (key == "output_config") return read_output_config(v, thinking, constraint);
        if (key == "context_management") return read_context_management(v, r.anthropic.edits);
        if (auto p = check_json(v, 1)) return p;
        r.unknown_fields.emplace_back(key);
        return {};
      }))
    return *p;
  if (!has_messages) return error("missing_field", "messages", "messages is missing");
  if (!has_max_tokens && !counting) return error("missing_field", "max_tokens", "max_tokens is missing");
  if (!has_max_tokens) r.max_tokens = int32_max; // (count_tokens: no answer, so no limit on it)
  if (!system.empty()) r.messages.push_back({"system", system});
  for (auto& m : messages) r.messages.push_back(std::move(m));
  r.sampling.max_tokens = *r.max_tokens;
  if (auto p = settle_thinking(thinking, r)) return *p;
  if (auto p = settle_tools(tools, r)) return *p;
  auto g = constraint_grammar(constraint);
  if (auto* e = std::get_if<api_error>(&g)) return *e;
  r.sampling.grammar = std::move(std::get<std::string>(g));
  if (r.sampling.thinking_budget >= *r.max_tokens)
    return error("invalid_value", "thinking.budget_tokens",
                 "thinking.budget_tokens must be less than max_tokens (" + std::to_string(*r.max_tokens) + "), got " +
                     std::to_string(r.sampling.thinking_budget));
  if (r.tools.empty()) {
    if (has_choice && r.choice.what != tool_choice::mode::none)
      return error("invalid_value", "tool_choice", "tool_choice needs tools");
    r.choice.what = tool_choice::mode::none;
  } else if (r.choice.what == tool_choice::mode::named &&
             std::none_of(r.tools.begin(), r.tools.end(), [&](const tool_spec& t) { return t.name == r.choice.name; })) {
    return error("invalid_value", "tool_choice", "tool_choice names \"" + r.choice.name + "\", which is not among the tools");
  }
  if (auto line = r.sampling.validate(); !line.empty()) {
    auto param = line.substr(0, line.find_first_of(" ["));
    return error("invalid_value", std::move(param), std::move(line));
  }
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
