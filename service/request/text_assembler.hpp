#pragma once
// One choice's text, assembled: its tokens detokenized (stop strings cut,
// each token's logprob paired with its bytes once they settle), the text
// split into the model's reasoning (its <think> block) and its answer, and
// the answer parsed for tool calls, as neutral output events. No protocol,
// no I/O.

#include "engine/tokenizer/output_processor.hpp"
#include "service/request/output_event.hpp"
#include "service/tools/reasoning_parser.hpp"
#include "service/tools/tool_parser.hpp"

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
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
  /// The detokenizer of its tokens, once the prompt is encoded (the
  /// output_processor's arguments); `logprobs`: each token's logprob is
  /// paired with its bytes.
  template <class... Args>
  void start_tokens(bool logprobs, Args&&... args) {
    detok_.emplace(std::forward<Args>(args)...);
    logprobs_ = logprobs;
  }
  auto detokenizer() -> output_processor& { return *detok_; }
  /// One token, with its logprob (when asked; a token a grammar forced has
  /// none): its text, its bytes' logprobs as they settle, and their events.
  /// The detokenizer's delta: the text, and whether (and why) it finished.
  auto feed_token(token_id t, std::optional<api::token_logprob> logprob, const emit& out) -> output_delta;
  /// Text not from tokens (an echoed prompt, a cached answer's pieces) and its logprobs.
  void feed(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out);
  /// The end of the text: what the parsers held.
  void finish(const emit& out);
  /// The finish reason as written: "stop" becomes "tool_calls" once a call was made.
  auto final_reason(std::string_view finish_reason) const -> std::string_view {
    return num_calls_ > 0 && finish_reason == "stop" ? "tool_calls" : finish_reason;
  }
  /// The text is parsed (for reasoning or calls).
  auto parsed() const -> bool { return tools_ || reasoning_; }
  /// Back to no text (a retry on another replica); the detokenizer goes
  /// too, until start_tokens again.
  void restart();

private:
  void content(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out);
  void reasoning(std::string_view text, const emit& out);
  void calls(const tools::parse_delta& d, std::vector<api::token_logprob> logprobs, const emit& out);
  static void plain(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out);

  std::string tool_family_, response_id_;
  std::optional<output_processor> detok_;
  bool logprobs_ = false;
  /// Logprobs of tokens whose bytes are not settled yet (a byte piece of an
  /// unfinished character), oldest first.
  std::deque<api::token_logprob> unsettled_;
  std::unique_ptr<tools::tool_parser> tools_;          ///< set when the text is parsed for tool calls
  std::unique_ptr<tools::reasoning_parser> reasoning_; ///< set for a reasoning model's answers
  bool reasoning_inside_ = false;
  std::size_t num_calls_ = 0; ///< calls begun so far
};

} // namespace troupe
