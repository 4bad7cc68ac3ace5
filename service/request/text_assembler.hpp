#pragma once
// One choice's text, assembled: the detokenized pieces split into the
// model's reasoning (its <think> block) and its answer, and the answer
// parsed for tool calls, as neutral output events. No protocol, no I/O.

#include "service/request/output_event.hpp"
#include "service/tools/reasoning_parser.hpp"
#include "service/tools/tool_parser.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class text_assembler {
public:
  /// Events come out in groups, one per parser step: an encoder writes a
  /// group as one event where its protocol does (OpenAI's tool_calls delta).
  using emit = std::function<void(std::span<const output_event>)>;

  /// `tool_family`: the tool-call format the text is parsed for (a family of
  /// tools::make_tool_parser), "" for plain text. Call ids are a function of
  /// `response_id`: a repeated request gets the same ones.
  text_assembler(std::string tool_family, std::string response_id);

  /// A reasoning model's answer: its <think> block comes out as reasoning;
  /// `inside`: the prompt opened the block. Call before the first text.
  void start_reasoning(bool inside);
  /// One token's text and its logprobs (when asked).
  void feed(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out);
  /// The end of the text: what the parsers held.
  void finish(const emit& out);
  /// The finish reason as written: "stop" becomes "tool_calls" once a call was made.
  auto final_reason(std::string_view finish_reason) const -> std::string_view {
    return num_calls_ > 0 && finish_reason == "stop" ? "tool_calls" : finish_reason;
  }
  /// The text is parsed (for reasoning or calls).
  auto parsed() const -> bool { return tools_ || reasoning_; }
  /// Back to no text (a retry on another replica).
  void restart();

private:
  void content(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out);
  void reasoning(std::string_view text, const emit& out);
  void calls(const tools::parse_delta& d, std::vector<api::token_logprob> logprobs, const emit& out);
  static void plain(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out);

  std::string tool_family_, response_id_;
  std::unique_ptr<tools::tool_parser> tools_;          ///< set when the text is parsed for tool calls
  std::unique_ptr<tools::reasoning_parser> reasoning_; ///< set for a reasoning model's answers
  bool reasoning_inside_ = false;
  std::size_t num_calls_ = 0; ///< calls begun so far
};

} // namespace troupe
