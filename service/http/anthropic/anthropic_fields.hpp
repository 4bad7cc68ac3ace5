#pragma once
// The Messages API's fields about thinking and the prompt's editing, read
// for parse_request (anthropic_api.cpp): thinking, output_config (and a
// message's own), context_management. Internal to service/http.

#include "service/http/json_reader.hpp"
#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"
#include "service/http/structured_output.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace troupe::api::anthropic::fields {

/// thinking and output_config.effort, as read; settled once both are.
struct thinking_config {
  std::string type;                   ///< enabled, adaptive, disabled; "" when absent
  std::optional<std::int32_t> budget; ///< budget_tokens
  std::string effort;                 ///< output_config.effort
  bool omit = false;                  ///< display "omitted"
};

/// output_config.effort: low, medium, high, xhigh or max.
auto read_effort(json_reader::od::value& v, const std::string& at, std::string& effort) -> json_reader::problem;

/// A message's own output_config ({"effort"}: Claude Code changes the
/// effort mid-conversation on a system message): the latest one counts.
auto read_message_config(json_reader::od::value& v, const std::string& at, std::string& effort) -> json_reader::problem;

/// thinking: {"type": "enabled", "budget_tokens"} | {"type": "adaptive"} |
/// {"type": "disabled"}, with "display": "summarized" | "omitted".
auto read_thinking(json_reader::od::value& v, thinking_config& t) -> json_reader::problem;

/// output_config: {"effort": low | medium | high | xhigh | max, "format":
/// {"type": "json_schema", "schema"}}.
auto read_output_config(json_reader::od::value& v, thinking_config& t, output_constraint& c) -> json_reader::problem;

/// context_management: {"edits": [clear_thinking_20251015 {keep: "all" |
/// {thinking_turns}}, clear_tool_uses_20250919 {trigger, keep,
/// clear_at_least, exclude_tools, clear_tool_inputs}]}.
auto read_context_management(json_reader::od::value& v, context_edits& e) -> json_reader::problem;

/// thinking and output_config.effort, read: the template's thinking off
/// (disabled), or on with a budget: budget_tokens, else the effort's (low
/// 1,024, medium 2,048, high 8,192, xhigh 16,384 tokens, max none: as
/// reasoning.effort's) when it is below max_tokens.
auto settle_thinking(const thinking_config& t, generation_request& r) -> std::optional<api_error>;

} // namespace troupe::api::anthropic::fields
