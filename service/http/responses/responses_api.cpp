#include "service/http/responses/responses_api.hpp"
#include "base/json_text.hpp"

#include "service/http/json_reader.hpp"
#include "service/http/structured_output.hpp"
#include "service/http/tool_fields.hpp"

#include <algorithm>

namespace troupe::api::responses {

namespace {

using namespace json_reader;

/// The conversation being read: items that belong to one assistant turn
/// (reasoning, its text, its function calls) join one message.
struct conversation {
  std::vector<chat_message> messages;
  std::vector<std::string> calls; ///< the last message's tool calls, as JSON

  auto assistant() -> chat_message& {
    if (messages.empty() || messages.back().role != "assistant") {
      settle();
      messages.push_back({"assistant", ""});
    }
    return messages.back();
  }
  void push(chat_message m) {
    settle();
    messages.push_back(std::move(m));
  }
  /// The last message's tool calls written into it.
  void settle() {
    if (calls.empty()) return;
    auto& m = messages.back();
    m.tool_calls_json = "[";
    for (std::size_t i = 0; i < calls.size(); ++i) m.tool_calls_json += (i ? "," : "") + calls[i];
    m.tool_calls_json += "]";
    m.null_content = m.content.empty();
    calls.clear();
  }
};

/// A message's content: a string, or input_text / output_text parts joined.
auto read_content(od::value& v, const std::string& path, std::string& out) -> problem {
  return read_text_parts(v, path, path, {"input_text", "output_text"}, out);
}

/// An input item's fields, as read.
struct item_fields {
  std::string type, role, call_id, name, arguments, output, content, reasoning, ns, sealed;
  bool has_content = false, has_output = false, has_arguments = false;
};

/// A reasoning item's summary: its parts' text, appended to `reasoning`.
auto read_summary(od::value& x, const std::string& f, std::string& reasoning) -> problem {
  od::array parts;
  if (auto e = x.get_array().get(parts)) return failed(e, f, f, "an array of summary parts");
  for (auto item : parts) {
    od::object part;
    if (auto e = item.get_object().get(part)) return failed(e, f, f, "a summary part");
    if (auto p = for_each_field(part, [&](std::string_view pk, od::value& y) -> problem {
          if (pk != "text") return check_json(y, 1);
          std::string text;
          if (auto p = read_string(y, f, f + ".text", text)) return p;
          reasoning += text;
          return problem{};
        }))
      return p;
  }
  return {};
}

/// Every field of an input item into `it`; unknown ones are an error.
auto read_item_fields(od::object& o, const std::string& path, item_fields& it) -> problem {
  return for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
    const auto f = path + "." + std::string(k);
    if (k == "type") return read_string(x, f, f, it.type);
    if (k == "role") return read_string(x, f, f, it.role);
    if (k == "content") {
      it.has_content = true;
      // A reasoning item's content is reasoning_text parts; a message's, text.
      return read_text_parts(x, f, f, {"input_text", "output_text", "reasoning_text"}, it.content);
    }
    if (k == "summary") return read_summary(x, f, it.reasoning);
    if (k == "call_id") return read_string(x, f, f, it.call_id);
    if (k == "namespace") return read_string(x, f, f, it.ns);
    if (k == "encrypted_content") return read_string(x, f, f, it.sealed);
    if (k == "name") return read_string(x, f, f, it.name);
    if (k == "arguments") {
      it.has_arguments = true;
      return read_string(x, f, f, it.arguments);
    }
    if (k == "output") {
      it.has_output = true;
      od::json_type t;
      if (auto e = x.type().get(t)) return bad_json(e);
      if (t == od::json_type::string) return read_string(x, f, f, it.output);
      return read_content(x, f, it.output);
    }
    if (k == "id" || k == "status") return check_json(x, 1);
    return error("unknown_parameter", f, "unknown parameter " + f);
  });
}

/// The item added to the conversation as its type says.
auto add_item(item_fields& it, const std::string& path, conversation& c) -> problem {
  if (it.type.empty() && !it.role.empty()) it.type = "message";
  if (it.type == "message") {
    if (!it.has_content) return error("missing_field", path + ".content", path + ".content is missing");
    if (it.role == "developer") it.role = "system";
    if (it.role == "assistant") {
      c.assistant().content += it.content;
      return {};
    }
    if (it.role != "user" && it.role != "system")
      return error("invalid_value", path + ".role",
                   path + ".role must be user, assistant, system or developer, got \"" + it.role + "\"");
    c.push({it.role, it.content});
    return {};
  }
  if (it.type == "function_call") {
    if (it.call_id.empty()) return error("missing_field", path + ".call_id", path + ".call_id is missing");
    if (it.name.empty()) return error("missing_field", path + ".name", path + ".name is missing");
    if (!it.has_arguments) return error("missing_field", path + ".arguments", path + ".arguments is missing");
    c.assistant();
    c.calls.push_back(tool_fields::tool_call_json(it.call_id, it.ns.empty() ? it.name : it.ns + "." + it.name, it.arguments));
    return {};
  }
  if (it.type == "function_call_output") {
    if (it.call_id.empty()) return error("missing_field", path + ".call_id", path + ".call_id is missing");
    if (!it.has_output) return error("missing_field", path + ".output", path + ".output is missing");
    chat_message m{"tool", it.output};
    m.tool_call_id = it.call_id;
    c.push(std::move(m));
    return {};
  }
  if (it.type == "reasoning") {
    auto& m = c.assistant();
    m.reasoning_content += it.content.empty() ? it.reasoning : it.content;
    if (it.content.empty() && !it.sealed.empty()) // (the gateway opens it; several items: one a line)
      m.reasoning_sealed += (m.reasoning_sealed.empty() ? "" : "\n") + it.sealed;
    return {};
  }
  return error("invalid_value", path + ".type",
               path + ".type \"" + it.type +
                   "\" is not supported (message, function_call, function_call_output and reasoning are)");
}

/// One input item.
auto read_item(od::object& o, const std::string& path, conversation& c) -> problem {
  item_fields it;
  if (auto p = read_item_fields(o, path, it)) return p;
  return add_item(it, path, c);
}

auto read_input(od::value& v, generation_request& r) -> problem {
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t == od::json_type::string) {
    std::string text;
    if (auto p = read_string(v, "input", "input", text)) return p;
    r.messages.push_back({"user", std::move(text)});
    return {};
  }
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, "input", "input", "a string or an array of items");
  conversation c;
  std::size_t i = 0;
  for (auto item : items) {
    const auto at = "input[" + std::to_string(i++) + "]";
    od::object o;
    if (auto e = item.get_object().get(o)) return failed(e, at, at, "an item");
    if (auto p = read_item(o, at, c)) return p;
  }
  if (i == 0) return error("invalid_value", "input", "input must not be empty");
  c.settle();
  for (auto& m : c.messages) r.messages.push_back(std::move(m));
  return {};
}

/// tool_choice: "none", "auto", "required" or {"type": "function", "name"}.
auto read_tool_choice(od::value& v, generation_request& r, responses_fields& f) -> problem {
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t == od::json_type::string) {
    if (auto p = tool_fields::read_tool_choice(v, r.choice)) return p;
  } else {
    od::object o;
    if (auto e = v.get_object().get(o)) return failed(e, "tool_choice", "tool_choice", "a string or an object");
    std::string type;
    if (auto p = for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
          if (k == "type") return read_string(x, "tool_choice", "tool_choice.type", type);
          if (k == "name") return read_string(x, "tool_choice", "tool_choice.name", r.choice.name);
          return error("unknown_parameter", "tool_choice", "unknown parameter tool_choice." + std::string(k));
        }))
      return p;
    if (type != "function")
      return error("invalid_value", "tool_choice", "tool_choice.type must be \"function\", got \"" + type + "\"");
    if (r.choice.name.empty()) return error("missing_field", "tool_choice", "tool_choice.name is missing");
    r.choice.what = tool_choice::mode::named;
  }
  switch (r.choice.what) { // echoed in the response
  case tool_choice::mode::none: f.tool_choice_json = R"("none")"; break;
  case tool_choice::mode::automatic: f.tool_choice_json = R"("auto")"; break;
  case tool_choice::mode::required: f.tool_choice_json = R"("required")"; break;
  case tool_choice::mode::named:
    f.tool_choice_json = R"({"type":"function","name":)" + json_text::quoted(r.choice.name) + "}";
    break;
  }
  return {};
}

/// text: {"format": {"type": "text" | "json_object" | "json_schema", "name",
/// "schema", "strict", "description"}}.
auto read_text_format(od::value& v, responses_fields& f, output_constraint& c) -> problem {
  od::object text;
  if (auto e = v.get_object().get(text)) return failed(e, "text", "text", "an object");
  return for_each_field(text, [&](std::string_view k, od::value& x) -> problem {
    if (k == "verbosity") {
      std::string verbosity;
      if (auto p = read_string(x, "text.verbosity", "text.verbosity", verbosity)) return p;
      if (verbosity != "medium")
        return error("unsupported_parameter", "text.verbosity", "text.verbosity \"" + verbosity + "\" is not supported (only \"medium\")");
      return {};
    }
    if (k != "format") return error("unknown_parameter", "text", "unknown parameter text." + std::string(k));
    od::object format;
    if (auto e = x.get_object().get(format)) return failed(e, "text.format", "text.format", "an object");
    std::string_view raw;
    if (format.raw_json().get(raw) == simdjson::SUCCESS) f.format_json.assign(raw);
    if (auto e = format.reset().error()) return bad_json(e);
    std::string type;
    bool has_schema = false;
    if (auto p = for_each_field(format, [&](std::string_view fk, od::value& y) -> problem {
          const auto f = "text.format." + std::string(fk);
          if (fk == "type") return read_string(y, f, f, type);
          if (fk == "schema") {
            has_schema = true;
            return read_raw_object(y, f, f, c.text);
          }
          if (fk == "name" || fk == "description") {
            std::string ignored;
            return read_string(y, f, f, ignored);
          }
          if (fk == "strict") {
            bool strict = false;
            return read_bool(y, f, strict); // the grammar is always strict
          }
          return error("unknown_parameter", f, "unknown parameter " + f);
        }))
      return p;
    c.param = "text.format";
    if (type == "text") return {};
    if (type == "json_object") {
      c.what = output_constraint::kind::json_object;
      return {};
    }
    if (type != "json_schema")
      return error("invalid_value", "text.format.type",
                   "text.format.type must be text, json_object or json_schema, got \"" + type + "\"");
    if (!has_schema) return error("missing_field", "text.format.schema", "text.format.schema is missing");
    c.what = output_constraint::kind::json_schema;
    return {};
  });
}

auto read_reasoning(od::value& v, generation_request& r, responses_fields& f) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, "reasoning", "reasoning", "an object");
  return for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
    if (k == "effort") {
      auto& effort = f.reasoning_effort;
      if (auto p = read_string(x, "reasoning.effort", "reasoning.effort", effort)) return p;
      if (effort != "none" && effort != "minimal" && effort != "low" && effort != "medium" && effort != "high")
        return error("invalid_value", "reasoning.effort",
                     "reasoning.effort must be none, minimal, low, medium or high, got \"" + effort + "\"");
      // A template's thinking is on or off: the lowest efforts turn it off,
      // the others set a thinking budget (vLLM's defaults for the three).
      if (effort == "none" || effort == "minimal") r.template_kwargs_json = R"({"enable_thinking":false})";
      else r.sampling.thinking_budget = effort == "low" ? 1024 : effort == "medium" ? 2048 : 8192;
      return {};
    }
    if (k == "summary" || k == "generate_summary") {
      auto& summary = f.reasoning_summary;
      if (auto p = read_string(x, "reasoning.summary", "reasoning.summary", summary)) return p;
      // troupe has no summarizer: the summary is the reasoning itself (docs/api.md).
      return summary == "auto" || summary == "concise" || summary == "detailed"
                 ? problem{}
                 : error("invalid_value", "reasoning.summary", "reasoning.summary must be auto, concise or detailed");
    }
    return error("unknown_parameter", "reasoning", "unknown parameter reasoning." + std::string(k));
  });
}

/// include: "reasoning.encrypted_content" (reasoning items carry their
/// text sealed by the server's key, for a client that stores nothing:
/// docs/api.md); "message.output_text.logprobs" is not served.
auto read_include(od::value& v, responses_fields& f) -> problem {
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, "include", "include", "an array of strings");
  for (auto item : items) {
    od::value x;
    if (auto e = item.get(x)) return bad_json(e);
    std::string what;
    if (auto p = read_string(x, "include", "include", what)) return p;
    if (what == "reasoning.encrypted_content") f.include_encrypted = true;
    else
      return error("unsupported_parameter", "include",
                   "include \"" + what + "\" is not supported (\"reasoning.encrypted_content\" is)");
  }
  return {};
}

auto not_supported(std::string_view param, std::string why) -> api_error {
  return error("unsupported_parameter", std::string(param), std::string(param) + " " + why);
}

/// What the body said besides the request and `f`, settled once every field is read.
struct body_fields {
  bool has_input = false, has_choice = false;
  output_constraint constraint;
  tool_fields::flat_tools tools;
  std::vector<chat_message> input;
};

/// One field of the body, into the request, `f` or `b`.
auto read_field(std::string_view key, od::value& v, generation_request& r, responses_fields& f, body_fields& b) -> problem {
  if (key == "model") return read_string(v, key, key, r.model);
  if (key == "input") {
    b.has_input = true;
    generation_request scratch;
    if (auto p = read_input(v, scratch)) return p;
    b.input = std::move(scratch.messages);
    return {};
  }
  if (key == "instructions") {
    f.has_instructions = true;
    return read_string(v, key, key, f.instructions);
  }
  if (key == "max_output_tokens") return read_int(v, key, 1, int32_max, r.max_tokens.emplace());
  if (key == "temperature") return read_float(v, key, r.sampling.temperature);
  if (key == "top_p") return read_float(v, key, r.sampling.top_p);
  if (key == "stream") return read_bool(v, key, r.stream);
  if (key == "store") return read_bool(v, key, f.store);
  if (key == "previous_response_id") {
    if (auto p = read_string(v, key, key, f.previous_response_id)) return p;
    if (f.previous_response_id.empty())
      return error("invalid_value", "previous_response_id", "previous_response_id must not be empty");
    return {};
  }
  if (key == "tools") // (kept as given too, for the response object)
    return tool_fields::read_flat_tools(v, tool_fields::responses_tools, r.tools, b.tools, &f.tools_json);
  if (key == "tool_choice") {
    b.has_choice = true;
    return read_tool_choice(v, r, f);
  }
  if (key == "parallel_tool_calls") return read_bool(v, key, r.parallel_tool_calls);
  if (key == "text") return read_text_format(v, f, b.constraint);
  if (key == "reasoning") return read_reasoning(v, r, f);
  if (key == "user") return read_string(v, key, key, r.user);
  if (key == "metadata") {
    std::string metadata;
    if (auto p = read_raw_object(v, key, key, metadata)) return p;
    f.metadata_json = std::move(metadata);
    return {};
  }
  if (key == "truncation") {
    std::string t;
    if (auto p = read_string(v, key, key, t)) return p;
    return t == "disabled" ? problem{} : not_supported(key, "\"" + t + "\" is not supported (only \"disabled\": a prompt too long is a 400)");
  }
  if (key == "background") {
    bool background = false;
    if (auto p = read_bool(v, key, background)) return p;
    return background ? not_supported(key, "true is not supported") : problem{};
  }
  if (key == "include") return read_include(v, f);
  if (key == "prompt_cache_key") return read_string(v, key, key, r.cache_key);
  if (key == "client_metadata") {
    std::string ignored; // (Codex's turn ids: about the client, not the answer)
    return read_raw_object(v, key, key, ignored);
  }
  if (key == "top_logprobs" || key == "conversation" || key == "prompt") {
    if (auto p = check_json(v, 1)) return p;
    return not_supported(key, "is not supported yet");
  }
  // Optional and without effect on the text, as chat's (docs/api.md).
  if (key == "service_tier" || key == "safety_identifier") return check_json(v, 1);
  if (auto p = check_json(v, 1)) return p;
  r.unknown_fields.emplace_back(key);
  return {};
}

/// `b` settled into the request and `f`, and the checks that need the whole request.
auto finish(body_fields& b, generation_request& r, responses_fields& f) -> problem {
  if (!b.has_input) return error("missing_field", "input", "input is missing");
  if (f.has_instructions) r.messages.push_back({"system", f.instructions});
  for (auto& m : b.input) r.messages.push_back(std::move(m));
  if (r.max_tokens) r.sampling.max_tokens = *r.max_tokens;
  r.skipped_tools = std::move(b.tools.skipped);
  f.namespaces = std::move(b.tools.namespaces);
  if (!b.tools.tools.empty()) r.tools_json = tool_fields::chat_tools_json(b.tools.tools, {});
  if (r.tools.empty()) {
    if (b.has_choice && r.choice.what != tool_choice::mode::none)
      return error("invalid_value", "tool_choice", "tool_choice needs tools");
    r.choice.what = tool_choice::mode::none;
  } else if (r.choice.what == tool_choice::mode::named &&
             std::none_of(r.tools.begin(), r.tools.end(), [&](const tool_spec& t) { return t.name == r.choice.name; })) {
    return error("invalid_value", "tool_choice", "tool_choice names \"" + r.choice.name + "\", which is not among the tools");
  }
  auto g = constraint_grammar(b.constraint);
  if (auto* e = std::get_if<api_error>(&g)) return *e;
  r.sampling.grammar = std::move(std::get<std::string>(g));
  if (auto e = check_sampling(r.sampling)) return *e;
  return {};
}

} // namespace

auto parse_request(std::string_view body, const sampling_params& defaults, responses_fields& f)
    -> std::variant<generation_request, api_error> {
  f = responses_fields{};
  generation_request r;
  r.kind = endpoint::chat;
  r.thinking_param = "reasoning.effort";
  r.thinking_implied = true;
  r.sampling = defaults;
  body_fields b;
  if (auto p = read_object(body, "request body",
                           [&](std::string_view key, od::value& v) { return read_field(key, v, r, f, b); }))
    return *p;
  if (auto p = finish(b, r, f)) return *p;
  return r;
}

} // namespace troupe::api::responses
