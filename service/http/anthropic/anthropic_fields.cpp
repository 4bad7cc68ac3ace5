#include "service/http/anthropic/anthropic_fields.hpp"

namespace troupe::api::anthropic::fields {

using namespace json_reader;

namespace {

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

} // namespace

/// output_config.effort: low, medium, high, xhigh or max.
auto read_effort(od::value& v, const std::string& at, std::string& effort) -> problem {
  if (auto p = read_string(v, at, at, effort)) return p;
  for (const auto* e : {"low", "medium", "high", "xhigh", "max"})
    if (effort == e) return problem{};
  return error("invalid_value", at, at + " must be low, medium, high, xhigh or max");
}

/// A message's own output_config ({"effort"}: Claude Code changes the
/// effort mid-conversation on a system message): the latest one counts.
auto read_message_config(od::value& v, const std::string& at, std::string& effort) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, at, at, "an object");
  return for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
    if (k == "effort") return read_effort(x, at + ".effort", effort);
    return error("unknown_parameter", at, "unknown parameter " + at + "." + std::string(k));
  });
}


/// thinking: {"type": "enabled", "budget_tokens"} | {"type": "adaptive"} |
/// {"type": "disabled"}, with "display": "summarized" | "omitted".
auto read_thinking(od::value& v, thinking_config& t) -> problem {
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
  t.omit = display == "omitted";
  return {};
}

/// output_config: {"effort": low | medium | high | xhigh | max, "format":
/// {"type": "json_schema", "schema"}}.
auto read_output_config(od::value& v, thinking_config& t, output_constraint& c) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, "output_config", "output_config", "an object");
  return for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
    if (k == "effort") return read_effort(x, "output_config.effort", t.effort);
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

/// context_management: {"edits": [clear_thinking_20251015 {keep: "all" |
/// {thinking_turns}}, clear_tool_uses_20250919 {trigger, keep,
/// clear_at_least, exclude_tools, clear_tool_inputs}]}.
namespace {

/// clear_thinking_20251015's keep: "all" (-1) or {"type": "thinking_turns", "value": n}.
auto read_thinking_keep(od::value& y, const std::string& f, std::int32_t& keep) -> problem {
  od::json_type t;
  if (auto err = y.type().get(t)) return bad_json(err);
  if (t == od::json_type::string) {
    std::string all;
    if (auto p = read_string(y, f, f, all)) return p;
    keep = -1;
    return all == "all" ? problem{} : error("invalid_value", f, f + " must be \"all\" or {\"type\": \"thinking_turns\", \"value\": n}");
  }
  std::int64_t n = 1;
  auto p = read_count(y, f, "thinking_turns", n);
  keep = static_cast<std::int32_t>(n);
  return p;
}

/// One edit, read into `e`: its type first, each type once.
auto read_edit(od::object& edit, const std::string& at, context_edits& e) -> problem {
  std::string type;
  const auto bad_type = [&] {
    return error("invalid_value", at + ".type",
                 at + ".type must be clear_thinking_20251015 or clear_tool_uses_20250919, each once, got \"" + type + "\"");
  };
  if (auto p = for_each_field(edit, [&](std::string_view k, od::value& y) -> problem {
        const auto f = at + "." + std::string(k);
        if (k == "type") {
          if (auto p = read_string(y, f, f, type)) return p;
          if (type == "clear_thinking_20251015" && !e.clear_thinking) {
            e.clear_thinking = true;
            e.thinking_first = !e.clear_tool_uses;
            return {};
          }
          if (type == "clear_tool_uses_20250919" && !e.clear_tool_uses) {
            e.clear_tool_uses = true;
            return {};
          }
          return bad_type();
        }
        if (type == "clear_thinking_20251015" && k == "keep") return read_thinking_keep(y, f, e.keep_thinking_turns);
        if (type == "clear_tool_uses_20250919") return read_tool_uses_edit(k, y, f, e);
        return error("unknown_parameter", f, "unknown parameter " + f + " (type must come first)");
      }))
    return p;
  return type.empty() ? bad_type() : problem{};
}

} // namespace

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
      if (auto p = read_edit(edit, at, e)) return p;
    }
    return problem{};
  });
}

/// thinking and output_config.effort, read: the template's thinking off
/// (disabled), or on with a budget: budget_tokens, else the effort's (low
/// 1,024, medium 2,048, high 8,192, xhigh 16,384 tokens, max none: as
/// reasoning.effort's) when it is below max_tokens.
auto settle_thinking(const thinking_config& t, generation_request& r) -> std::optional<api_error> {
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

} // namespace troupe::api::anthropic::fields
