#pragma once
// Anthropic's context editing (the Messages API's context_management): a
// conversation's older thinking and tool results cleared before the prompt
// is rendered, as the API applies them server-side; the client keeps its
// whole history. troupe applies them where it renders the prompt (the
// tokenizer pool), so that the cleared tokens are counted.

#include "engine/tokenizer/chat_template.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// The edits a request asks for, each at most once.
struct context_edits {
  /// clear_thinking_20251015: the reasoning of all but the last
  /// keep_thinking_turns assistant turns that have some (-1: keep all).
  bool clear_thinking = false;
  std::int32_t keep_thinking_turns = 1;
  bool thinking_first = true; ///< the order the request listed them in (applied_edits keep it)
  /// clear_tool_uses_20250919: once the prompt has more than trigger_tokens
  /// tokens, the results of all but the last keep_tool_uses tool uses
  /// (those of exclude_tools never) are replaced by a placeholder, with
  /// their calls' inputs too when clear_tool_inputs; unless that clears
  /// fewer than clear_at_least tokens.
  bool clear_tool_uses = false;
  std::int64_t trigger_tokens = 100000;
  std::int32_t keep_tool_uses = 3;
  std::int64_t clear_at_least = 0;
  std::vector<std::string> exclude_tools;
  bool clear_tool_inputs = false;

  auto any() const -> bool { return clear_thinking || clear_tool_uses; }
  friend auto operator==(const context_edits&, const context_edits&) -> bool = default;
};

/// What one edit did (Anthropic's applied_edits entry): thinking turns or
/// tool uses cleared, and the prompt's tokens that went with them.
struct applied_edit {
  bool thinking = false; ///< clear_thinking_20251015, else clear_tool_uses_20250919
  std::int32_t cleared = 0;
  std::int64_t cleared_tokens = 0;
  friend auto operator==(const applied_edit&, const applied_edit&) -> bool = default;
};

/// The text a cleared tool result reads.
inline constexpr std::string_view cleared_tool_result = "[tool result cleared to save context]";

/// Clears the reasoning of all but the last `keep` assistant turns that
/// have some (keep < 0: none cleared); returns how many turns were cleared.
auto clear_thinking(std::vector<chat_message>& messages, std::int32_t keep) -> std::int32_t;

/// Replaces the results of all but the last edits.keep_tool_uses tool
/// results (skipping those of edits.exclude_tools, named through the
/// assistants' tool calls) by cleared_tool_result, and empties their calls'
/// arguments when clear_tool_inputs; returns how many were cleared.
auto clear_tool_uses(std::vector<chat_message>& messages, const context_edits& edits) -> std::int32_t;

} // namespace troupe
