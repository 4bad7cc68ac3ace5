// The reading half of openai_api.hpp: one pass of simdjson On-Demand over the
// body, each field read where it stands (JSON objects have no order).
#include "service/http/openai/openai_api.hpp"
#include "base/json_text.hpp"

#include "service/http/json_reader.hpp"
#include "service/http/structured_output.hpp"
#include "service/http/tool_fields.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>

namespace troupe::api {

namespace {

using namespace json_reader;

auto read_seed(od::value& v, std::uint64_t& out) -> problem {
  od::number n;
  if (auto p = read_number(v, "seed", "seed", "an integer", n)) return p;
  const auto negative = [&](const std::string& got) {
    return error("invalid_value", "seed", "seed must be between 0 and 18446744073709551615, got " + got);
  };
  switch (n.get_number_type()) {
    case od::number_type::signed_integer:
      if (n.get_int64() < 0) return negative(std::to_string(n.get_int64()));
      out = static_cast<std::uint64_t>(n.get_int64());
      break;
    case od::number_type::unsigned_integer: out = n.get_uint64(); break;
    case od::number_type::floating_point_number: {
      const double d = n.get_double();
      if (d != std::trunc(d)) return bad_type("seed", "seed", "an integer");
      if (d < 0) return negative(show(d));
      if (!(d < 18446744073709551616.0))
        return error("invalid_value", "seed", "seed must be between 0 and 18446744073709551615, got " + show(d));
      out = static_cast<std::uint64_t>(d);
      break;
    }
  }
  return {};
}

/// A string, or an array of strings; none may be empty.
auto read_stop(od::value& v, std::vector<std::string>& out) -> problem {
  constexpr std::string_view expected = "a string or an array of strings";
  out.clear();
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t == od::json_type::string) {
    out.emplace_back();
    if (auto p = read_string(v, "stop", "stop", out.back())) return p;
    if (out.back().empty()) return error("invalid_value", "stop", "stop must not be empty");
    return {};
  }
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, "stop", "stop", expected);
  for (auto item : items) {
    const std::string path = "stop[" + std::to_string(out.size()) + "]";
    od::value element;
    if (auto e = item.get(element)) return bad_json(e);
    out.emplace_back();
    if (auto p = read_string(element, "stop", path, out.back())) return p;
    if (out.back().empty()) return error("invalid_value", "stop", path + " must not be empty");
  }
  return {};
}

/// Completions' prompt: a string, token ids, or a batch of one of either.
auto read_prompt(od::value& v, generation_request& r) -> problem {
  constexpr std::string_view expected = "a string, an array of token ids, or an array holding one of those";
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t == od::json_type::string) return read_string(v, "prompt", "prompt", r.prompt);
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, "prompt", "prompt", expected);
  int num_items = 0;
  od::json_type first = od::json_type::null;
  for (auto item : items) {
    od::value element;
    od::json_type et;
    if (auto e = item.get(element)) return bad_json(e);
    if (auto e = element.type().get(et)) return bad_json(e);
    if (num_items == 0) first = et;
    const std::string path = "prompt[" + std::to_string(num_items) + "]";
    const bool is_input = et == od::json_type::string || et == od::json_type::number || et == od::json_type::array;
    if (et != first || !is_input)
      return bad_type("prompt", "prompt", expected);
    if (et != od::json_type::number && num_items == 1)
      return error("invalid_value", "prompt", "prompt holds more than one prompt; batches are not supported");
    if (et == od::json_type::string) {
      if (auto p = read_string(element, "prompt", path, r.prompt)) return p;
    } else if (et == od::json_type::array) {
      od::array ids;
      if (auto e = element.get_array().get(ids)) return bad_json(e);
      if (auto p = read_token_ids(ids, "prompt", path, r.prompt_tokens)) return p;
    } else {
      std::int64_t id = 0;
      if (auto p = read_int(element, "prompt", path, 0, int32_max, id)) return p;
      r.prompt_tokens.push_back(static_cast<token_id>(id));
    }
    ++num_items;
  }
  if (num_items == 0 || (first == od::json_type::array && r.prompt_tokens.empty()))
    return error("invalid_value", "prompt", "prompt must not be empty");
  return {};
}

/// A message's content: a string, or text parts [{type: "text", text}] joined.
auto read_content(od::value& v, const std::string& path, std::string& out) -> problem {
  return read_text_parts(v, path, path, {"text"}, out);
}

auto read_messages(od::value& v, std::vector<chat_message>& out) -> problem {
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, "messages", "messages", "an array of messages");
  for (auto item : items) {
    const std::string path = "messages[" + std::to_string(out.size()) + "]";
    od::object message;
    if (auto e = item.get_object().get(message)) return failed(e, "messages", path, "an object");
    chat_message m;
    bool has_role = false, has_content = false, has_tool_calls = false;
    if (auto p = for_each_field(message, [&](std::string_view key, od::value& v) -> problem {
          if (key == "role") {
            has_role = true;
            return read_string(v, path + ".role", path + ".role", m.role);
          }
          if (key == "content") {
            m.content.clear();
            has_content = true;
            return read_content(v, path + ".content", m.content);
          }
          if (key == "tool_calls") {
            has_tool_calls = true;
            return tool_fields::read_tool_calls(v, path + ".tool_calls", m.tool_calls_json);
          }
          if (key == "tool_call_id") return read_string(v, path + ".tool_call_id", path + ".tool_call_id", m.tool_call_id);
          if (key == "name") return read_string(v, path + ".name", path + ".name", m.name);
          if (key == "reasoning_content")
            return read_string(v, path + ".reasoning_content", path + ".reasoning_content", m.reasoning_content);
          return check_json(v, 1);
        }))
      return p;
    if (!has_role) return error("missing_field", path + ".role", path + ".role is missing");
    if (m.role == "developer") m.role = "system"; // OpenAI's newer name for it
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool")
      return error("invalid_value", path + ".role",
                   path + ".role must be \"system\", \"user\", \"assistant\" or \"tool\", got \"" + m.role + "\"");
    if (has_tool_calls && m.role != "assistant")
      return error("invalid_value", path + ".tool_calls", path + ".tool_calls is for assistant messages");
    if (m.role == "tool" && m.tool_call_id.empty())
      return error("missing_field", path + ".tool_call_id", path + ".tool_call_id is missing (a tool message answers a call)");
    if (!has_content) {
      if (m.tool_calls_json.empty()) return error("missing_field", path + ".content", path + ".content is missing");
      m.null_content = true; // an assistant's calls alone
    }
    out.push_back(std::move(m));
  }
  if (out.empty()) return error("invalid_value", "messages", "messages must not be empty");
  return {};
}

/// What a request said, before the fields that depend on each other are joined.
struct fields {
  generation_request r;
  bool has_input = false;
  std::optional<std::int32_t> max_tokens, max_completion_tokens;
  std::string foreign; // the first field of the other endpoint's that shapes an answer
  bool has_stream_options = false;
  std::optional<bool> chat_logprobs;
  std::optional<std::int32_t> logprobs_count; // completions' logprobs, chat's top_logprobs
  output_constraint constraint;
  std::string second_constraint; // a second constraining field: refused
  bool has_tool_choice = false;
  std::optional<std::int32_t> best_of;
};

/// response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema", "strict", "description"}}.
auto read_response_format(od::value& v, output_constraint& c) -> problem {
  constexpr std::string_view key = "response_format";
  od::object format;
  if (auto e = v.get_object().get(format)) return failed(e, key, key, "an object");
  std::string type;
  bool has_schema_field = false;
  if (auto p = for_each_field(format, [&](std::string_view k, od::value& x) -> problem {
        if (k == "type") return read_string(x, key, "response_format.type", type);
        if (k == "json_schema") {
          has_schema_field = true;
          od::object js;
          if (auto e = x.get_object().get(js)) return failed(e, key, "response_format.json_schema", "an object");
          return for_each_field(js, [&](std::string_view jk, od::value& y) -> problem {
            if (jk == "schema") return read_raw_object(y, key, "response_format.json_schema.schema", c.text);
            if (jk == "name" || jk == "description") {
              std::string ignored;
              return read_string(y, key, "response_format.json_schema." + std::string(jk), ignored);
            }
            if (jk == "strict") {
              bool strict = false;
              return read_bool(y, key, strict); // the grammar is always strict
            }
            return error("unknown_parameter", std::string(key),
                         "unknown parameter response_format.json_schema." + std::string(jk));
          });
        }
        return error("unknown_parameter", std::string(key), "unknown parameter response_format." + std::string(k));
      }))
    return *p;
  c.param = key;
  if (type == "text") {
    c.what = output_constraint::kind::none;
  } else if (type == "json_object") {
    c.what = output_constraint::kind::json_object;
  } else if (type == "json_schema") {
    if (!has_schema_field) return error("missing_field", std::string(key), "response_format.json_schema is missing");
    if (c.text.empty()) return error("missing_field", std::string(key), "response_format.json_schema.schema is missing");
    c.what = output_constraint::kind::json_schema;
  } else {
    return error("invalid_value", std::string(key),
                 "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got \"" + type + "\"");
  }
  return {};
}

/// vLLM's guided_json (a schema, as an object or its text), guided_regex,
/// guided_choice (strings) and guided_grammar (GBNF).
auto read_guided(std::string_view key, od::value& v, output_constraint& c) -> problem {
  c.param = key;
  if (key == "guided_choice") {
    od::array items;
    if (auto e = v.get_array().get(items)) return failed(e, key, key, "an array of strings");
    for (auto item : items) {
      od::value x;
      if (auto e = item.get(x)) return bad_json(e);
      if (auto p = read_string(x, key, key, c.choices.emplace_back())) return p;
    }
    if (c.choices.empty()) return error("invalid_value", std::string(key), "guided_choice must not be empty");
    c.what = output_constraint::kind::choice;
    return {};
  }
  if (key == "guided_json") {
    c.what = output_constraint::kind::json_schema;
    od::json_type t;
    if (auto e = v.type().get(t)) return bad_json(e);
    if (t == od::json_type::string) return read_string(v, key, key, c.text);
    return read_raw_object(v, key, key, c.text);
  }
  c.what = key == "guided_regex" ? output_constraint::kind::regex : output_constraint::kind::grammar;
  if (auto p = read_string(v, key, key, c.text)) return p;
  if (c.text.empty()) return error("invalid_value", std::string(key), std::string(key) + " must not be empty");
  return {};
}

auto read_stream_options(od::value& v, bool& include_usage) -> problem {
  od::object options;
  if (auto e = v.get_object().get(options)) return failed(e, "stream_options", "stream_options", "an object");
  return for_each_field(options, [&](std::string_view key, od::value& v) -> problem {
    if (key != "include_usage") return check_json(v, 1);
    if (auto e = v.get_bool().get(include_usage))
      return failed(e, "stream_options", "stream_options.include_usage", "a boolean");
    return {};
  });
}

/// A field OpenAI defines that troupe does not implement yet: refused, not ignored.
auto not_supported(std::string_view param, std::string_view what = {}) -> api_error {
  return error("unsupported_parameter", std::string(param),
               std::string(what.empty() ? param : what) + " is not supported yet");
}

/// OpenAI's logit_bias: {"token id": bias}. The ids are checked against the
/// vocabulary once the model is known; the range by sampling_params::validate.
auto read_logit_bias(od::value& v, std::vector<std::pair<token_id, float>>& out) -> problem {
  od::object biases;
  if (auto e = v.get_object().get(biases)) return failed(e, "logit_bias", "logit_bias", "an object");
  out.clear();
  std::unordered_map<token_id, std::size_t> at; // id -> its entry in out: repeats cost O(1), not a scan
  return for_each_field(biases, [&](std::string_view key, od::value& b) -> problem {
    std::int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc{} || end != key.data() + key.size() || id < 0 || id > int32_max)
      return error("invalid_value", "logit_bias",
                   "logit_bias keys must be token ids (\"1234\"), got \"" + std::string(key) + "\"");
    float bias = 0;
    if (auto p = read_float(b, "logit_bias", bias)) return p;
    const auto t = static_cast<token_id>(id);
    const auto [it, fresh] = at.emplace(t, out.size());
    if (fresh) out.emplace_back(t, bias);
    else out[it->second].second = bias; // a repeated key: the last wins, as in JSON.parse
    return {};
  });
}

/// response_format or a guided_* field: the request's output constraint (a
/// second one is noted, to be refused).
auto read_constraint(std::string_view key, od::value& v, fields& f) -> problem {
  output_constraint c;
  if (auto p = key == "response_format" ? read_response_format(v, c) : read_guided(key, v, c)) return p;
  if (c.what != output_constraint::kind::none) {
    if (f.constraint.what != output_constraint::kind::none) {
      f.second_constraint = std::string(key);
      return {};
    }
    f.constraint = std::move(c);
  }
  return {};
}

/// A field read_field does not list: ignored, noted as the other endpoint's,
/// or noted as unknown.
auto read_unlisted(bool chat, std::string_view key, od::value& v, fields& f, bool ws_message) -> problem {
  // Documented by OpenAI as optional and without effect on the text; see docs/api.md.
  if (key == "metadata" || key == "store" || key == "service_tier" || key == "prompt_cache_key" ||
      key == "safety_identifier" || (!chat && key == "parallel_tool_calls"))
    return check_json(v, 1);
  if (ws_message && (key == "id" || key == "type")) return {}; // the WebSocket envelope's (parse_ws_envelope)
  if (auto p = check_json(v, 1)) return p; // broken JSON is reported as such first
  // The other endpoint's fields that shape an answer: a client that sends
  // them relies on them, and ignoring them would change what it gets.
  static constexpr std::array<std::string_view, 4> chat_only{"messages", "tools", "tool_choice", "thinking_token_budget"};
  static constexpr std::array<std::string_view, 4> completions_only{"prompt", "echo", "suffix", "best_of"};
  const auto& other = chat ? completions_only : chat_only;
  if (std::find(other.begin(), other.end(), key) != other.end()) {
    if (f.foreign.empty()) f.foreign = key; // (refused after a missing input)
    return {};
  }
  f.r.unknown_fields.emplace_back(key);
  return {};
}

auto read_field(endpoint kind, std::string_view key, od::value& v, fields& f, bool ws_message) -> problem {
  auto& r = f.r;
  auto& s = r.sampling;
  const bool chat = kind == endpoint::chat;
  if (key == "model") return read_string(v, key, key, r.model);
  if (key == (chat ? "messages" : "prompt")) {
    f.has_input = true;
    return chat ? read_messages(v, r.messages) : read_prompt(v, r);
  }
  if (key == "max_tokens") return read_int(v, key, 1, int32_max, f.max_tokens.emplace());
  if (key == "max_completion_tokens")
    return read_int(v, key, 1, int32_max, f.max_completion_tokens.emplace());
  if (key == "temperature") return read_float(v, key, s.temperature);
  if (key == "top_p") return read_float(v, key, s.top_p);
  if (key == "top_k") return read_int(v, key, int32_min, int32_max, s.top_k);
  if (key == "min_p") return read_float(v, key, s.min_p);
  if (key == "presence_penalty") return read_float(v, key, s.presence_penalty);
  if (key == "frequency_penalty") return read_float(v, key, s.frequency_penalty);
  if (key == "repetition_penalty") return read_float(v, key, s.repetition_penalty);
  if (key == "seed") return read_seed(v, s.seed.emplace());
  if (key == "stop") return read_stop(v, s.stop);
  if (key == "stop_token_ids") {
    od::array ids;
    if (auto e = v.get_array().get(ids)) return failed(e, key, key, "an array of token ids");
    s.stop_token_ids.clear();
    return read_token_ids(ids, key, key, s.stop_token_ids);
  }
  if (key == "ignore_eos") return read_bool(v, key, s.ignore_eos);
  if (key == "logprobs" && chat) return read_bool(v, key, f.chat_logprobs.emplace());
  if (key == "logprobs" || (key == "top_logprobs" && chat))
    return read_int(v, key, 0, 20, f.logprobs_count.emplace());
  if (key == "n") return read_int(v, key, 1, max_choices, r.n);
  if (key == "user") return read_string(v, key, key, r.user);
  if (key == "priority") return read_int(v, key, int32_min, int32_max, r.priority);
  if (key == "stream") return read_bool(v, key, r.stream);
  if (key == "stream_options") {
    f.has_stream_options = true;
    return read_stream_options(v, r.include_usage);
  }
  if (key == "logit_bias") return read_logit_bias(v, s.logit_bias);
  if (key == "echo" && !chat) return read_bool(v, key, r.echo);
  if (key == "best_of" && !chat) return read_int(v, key, 1, max_choices, f.best_of.emplace());
  if (key == "response_format" || key == "guided_json" || key == "guided_regex" || key == "guided_choice" ||
      key == "guided_grammar")
    return read_constraint(key, v, f);
  if (chat && key == "tools") return tool_fields::read_tools(v, key, r.tools_json, &r.tools);
  if (chat && key == "tool_choice") {
    f.has_tool_choice = true;
    return tool_fields::read_tool_choice(v, r.choice);
  }
  if (chat && key == "parallel_tool_calls") return read_bool(v, key, r.parallel_tool_calls);
  if (chat && key == "chat_template_kwargs") return read_raw_object(v, key, key, r.template_kwargs_json);
  if (chat && key == "thinking_token_budget") return read_int(v, key, 0, int32_max, s.thinking_budget);
  if ((key == "suffix" && !chat) || (chat && (key == "functions" || key == "function_call")))
    return not_supported(key, key == "suffix" ? "suffix" : std::string(key) + " (the deprecated form of tools)");
  return read_unlisted(chat, key, v, f, ws_message);
}

/// The checks that need the whole request: required fields, fields that
/// depend on each other, and sampling_params' ranges.
auto finish(endpoint kind, fields& f, bool ws) -> problem {
  auto& r = f.r;
  if (!f.has_input) {
    const char* name = kind == endpoint::chat ? "messages" : "prompt";
    return error("missing_field", name, std::string(name) + " is missing");
  }
  if (!f.foreign.empty())
    return error("unknown_parameter", f.foreign,
                 f.foreign + " is a field of " + (kind == endpoint::chat ? "completions, not of chat completions"
                                                                          : "chat completions, not of completions"));
  r.max_tokens = f.max_completion_tokens ? f.max_completion_tokens : f.max_tokens;
  if (r.max_tokens) r.sampling.max_tokens = *r.max_tokens;
  if (f.has_stream_options && !r.stream)
    return error("invalid_value", "stream_options", "stream_options is only allowed when stream is true");
  r.best_of = f.best_of.value_or(r.n);
  if (r.best_of < r.n)
    return error("invalid_value", "best_of",
                 "best_of (" + std::to_string(r.best_of) + ") must be at least n (" + std::to_string(r.n) + ")");
  if (r.stream && r.best_of > r.n)
    return error("invalid_value", "best_of", "best_of > n cannot be streamed: the best are known only at the end");
  if (ws && r.n > 1) return error("invalid_value", "n", "n > 1 is not supported on the WebSocket");
  if (kind == endpoint::completions) {
    r.want_logprobs = f.logprobs_count.has_value();
  } else {
    r.want_logprobs = f.chat_logprobs.value_or(false);
    if (!r.want_logprobs && f.logprobs_count.value_or(0) > 0)
      return error("invalid_value", "top_logprobs", "top_logprobs needs logprobs to be true");
  }
  if (r.want_logprobs) {
    r.top_logprobs = f.logprobs_count.value_or(0);
    r.sampling.logprobs = r.top_logprobs;
  }
  if (r.echo && r.want_logprobs) r.sampling.prompt_logprobs = r.top_logprobs; // the echoed tokens' too
  if (!f.second_constraint.empty())
    return error("invalid_value", f.second_constraint,
                 f.second_constraint + " and " + f.constraint.param +
                     " both constrain the output; give one of response_format, guided_json, guided_regex, "
                     "guided_choice, guided_grammar");
  if (r.tools.empty()) {
    if (f.has_tool_choice && r.choice.what != tool_choice::mode::none)
      return error("invalid_value", "tool_choice", "tool_choice needs tools");
    r.choice.what = tool_choice::mode::none;
  } else if (r.choice.what == tool_choice::mode::named) {
    const bool known = std::any_of(r.tools.begin(), r.tools.end(), [&](const tool_spec& t) { return t.name == r.choice.name; });
    if (!known) return error("invalid_value", "tool_choice", "tool_choice names \"" + r.choice.name + "\", which is not among the tools");
  }
  auto g = constraint_grammar(f.constraint);
  if (auto* e = std::get_if<api_error>(&g)) return *e;
  r.sampling.grammar = std::move(std::get<std::string>(g));
  if (auto e = check_sampling(r.sampling)) return *e;
  return {};
}

} // namespace

auto parse_request(endpoint kind, std::string_view body, const sampling_params& defaults, bool ws_message)
    -> std::variant<generation_request, api_error> {
  fields f;
  f.r.kind = kind;
  f.r.sampling = defaults;
  if (auto p = read_object(body, "request body",
                           [&](std::string_view key, od::value& v) { return read_field(kind, key, v, f, ws_message); }))
    return *p;
  if (auto p = finish(kind, f, ws_message)) return *p;
  return std::move(f.r);
}

auto parse_tokenize(std::string_view body) -> std::variant<tokenize_request, api_error> {
  tokenize_request r;
  bool has_prompt = false;
  std::optional<bool> add_special, add_generation;
  if (auto p = read_object(body, "request body", [&](std::string_view key, od::value& v) -> problem {
        if (key == "model") return read_string(v, key, key, r.model);
        if (key == "prompt") {
          has_prompt = true;
          return read_string(v, key, key, r.prompt);
        }
        if (key == "messages") {
          r.chat = true;
          return read_messages(v, r.messages);
        }
        if (key == "add_special_tokens") return read_bool(v, key, add_special.emplace());
        if (key == "add_generation_prompt") return read_bool(v, key, add_generation.emplace());
        if (key == "return_token_strs") return read_bool(v, key, r.return_token_strs);
        if (key == "tools") return tool_fields::read_tools(v, key, r.tools_json, nullptr);
        if (key == "chat_template_kwargs") return read_raw_object(v, key, key, r.template_kwargs_json);
        return error("unknown_parameter", std::string(key),
                     "unknown parameter " + std::string(key) + " (troupe refuses fields it would ignore)");
      }))
    return *p;
  if (has_prompt && r.chat) return error("invalid_value", "messages", "give prompt or messages, not both");
  if (!has_prompt && !r.chat) return error("missing_field", "prompt", "prompt (or messages) is missing");
  if (!r.tools_json.empty() && !r.chat) return error("invalid_value", "tools", "tools are for messages, not a prompt");
  if (!r.template_kwargs_json.empty() && !r.chat)
    return error("invalid_value", "chat_template_kwargs", "chat_template_kwargs is for messages, not a prompt");
  if (add_generation && !r.chat)
    return error("invalid_value", "add_generation_prompt", "add_generation_prompt is for messages, not a prompt");
  r.add_generation_prompt = add_generation.value_or(true);
  r.add_special_tokens = add_special.value_or(!r.chat);
  return r;
}

auto parse_detokenize(std::string_view body) -> std::variant<detokenize_request, api_error> {
  detokenize_request r;
  bool has_tokens = false;
  if (auto p = read_object(body, "request body", [&](std::string_view key, od::value& v) -> problem {
        if (key == "model") return read_string(v, key, key, r.model);
        if (key == "tokens") {
          has_tokens = true;
          od::array items;
          if (auto e = v.get_array().get(items)) return failed(e, key, key, "an array of token ids");
          return read_token_ids(items, key, key, r.tokens);
        }
        return error("unknown_parameter", std::string(key),
                     "unknown parameter " + std::string(key) + " (troupe refuses fields it would ignore)");
      }))
    return *p;
  if (!has_tokens) return error("missing_field", "tokens", "tokens is missing");
  return r;
}

} // namespace troupe::api
