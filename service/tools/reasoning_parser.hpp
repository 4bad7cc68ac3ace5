#pragma once
// A reasoning model's thinking, split from its answer as it streams (vLLM's
// reasoning_content): Qwen3 and the DeepSeek-R1 distills write it between
// <think> and </think>. Where the prompt itself opens the block (R1's
// templates end the generation prompt with "<think>\n"), the answer starts
// inside it; else a <think> opening the answer (after whitespace) opens it.
// Text that may be part of a marker is held back until it is decided.

#include <string>
#include <string_view>

namespace troupe::tools {

struct reasoning_split {
  std::string reasoning, content;
};

class reasoning_parser {
public:
  explicit reasoning_parser(bool starts_inside) : state_(starts_inside ? state::inside : state::opening) {}

  auto feed(std::string_view text) -> reasoning_split;
  /// The end of the answer: what was held back (an unclosed block's text is reasoning).
  auto finish() -> reasoning_split;

  static constexpr std::string_view open_marker = "<think>";
  static constexpr std::string_view close_marker = "</think>";

  /// `gbnf` applied after the thinking: any text without </think> and then
  /// </think> (`inside`: the prompt opened the block; else an optional
  /// <think> block), a little whitespace, then a sentence of `gbnf`. Structured
  /// output and forced tool calls of a reasoning model so constrain its
  /// answer, not its thinking; the grammar's budget closes the block in time.
  static auto grammar_after(std::string_view gbnf, bool inside) -> std::string;

  /// Whether a rendered prompt ends inside a thinking block (an open
  /// <think> after the last </think>, followed by whitespace only).
  static auto prompt_opens(std::string_view prompt) -> bool;
  /// Whether it ends just after a closed thinking block (</think>, then
  /// whitespace only): the template turned thinking off (enable_thinking
  /// false writes an empty block), so the answer starts at once.
  static auto prompt_closes(std::string_view prompt) -> bool;

private:
  enum class state { opening, inside, content };
  state state_;
  std::string held_;
};

} // namespace troupe::tools
