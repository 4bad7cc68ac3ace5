#pragma once
// gpt-oss's "harmony" output, parsed as it streams. Its chat template ends
// the prompt with <|start|>assistant; the model then writes messages
//   [<|start|>assistant][ to=R]<|channel|>C[ to=R][ <|constrain|>T]<|message|>BODY
// each ended by <|end|> (and the last by <|return|> or <|call|>, which end
// generation). Channel analysis is its reasoning; a message to
// functions.NAME is a call to NAME, its body the arguments' JSON; the final
// channel, and commentary without a recipient (a preamble), are content.
// Text that does not open with a header is content as it stands. The
// markers are special tokens, shown in the text for this parser
// (tool_markers("harmony")).

#include "service/tools/tool_parser.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe::tools {

class harmony_parser final : public tool_parser {
public:
  explicit harmony_parser(id_source ids) : ids_(std::move(ids)) {}

  auto feed(std::string_view text) -> parse_delta override;
  auto finish() -> parse_delta override;

  /// A grammar of harmony messages: an optional analysis message (any text
  /// without '<'), then `gbnf` (its root a sentence of the messages that
  /// follow, e.g. a call's header and arguments).
  static auto grammar(std::string_view gbnf) -> std::string;
  /// A grammar for a constrained answer: an optional analysis message, then
  /// the final channel's message, `gbnf` its body (structured output).
  static auto final_grammar(std::string_view gbnf) -> std::string;

  /// Every marker the format writes.
  static constexpr std::string_view markers[] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
                                                 "<|end|>",   "<|call|>",    "<|return|>"};

private:
  enum class state { header, body, plain };
  enum class sink { reasoning, content, call };

  /// One step over buf_; false when it needs more text.
  auto step(parse_delta& d) -> bool;
  auto header_step(parse_delta& d) -> bool;
  auto body_step(parse_delta& d) -> bool;
  void open_message(std::string_view header, parse_delta& d);
  void close_message(parse_delta& d);
  void emit(std::string_view text, parse_delta& d);

  id_source ids_;
  state state_ = state::header;
  sink sink_ = sink::content;
  std::string buf_;          ///< the header so far, or body text held back (a marker's possible start)
  std::size_t calls_ = 0;    ///< calls opened
  bool call_args_ = false;   ///< the open call's arguments have some text
};

} // namespace troupe::tools
