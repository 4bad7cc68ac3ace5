#pragma once
// One choice's answer as it is written: its text assembled into neutral
// events (text_assembler.hpp), and those written by its protocol's encoder
// (wire_encoder.hpp), with the counts its usage reports. The session does
// the I/O (start_stream, write, respond) with what this returns; nothing
// here knows which protocol it writes.

#include "service/request/text_assembler.hpp"
#include "service/request/wire_encoder.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {

class stream_writer {
public:
  /// `protocol` makes the encoder (SSE, WebSocket events or one whole
  /// response). `tool_parser`: the tool-call format the text is parsed for
  /// (a family of tools::make_tool_parser), "" for plain text: calls go out
  /// as the protocol writes them, and an answer that made one finishes
  /// "tool_calls".
  stream_writer(const api::wire_protocol& protocol, const api::generation_request& body, api::response_head head,
                std::string_view tool_parser = {});

  /// A stream opens with a 200 and SSE headers (a WebSocket's has none).
  auto sse() const -> bool { return sse_; }
  /// Sent as it comes (WebSocket or SSE), rather than whole at the end.
  auto streaming() const -> bool { return streaming_; }
  auto head() const -> const api::response_head& { return head_; }
  void set_model(std::string model) {
    encoder_->set_model(model);
    head_.model = std::move(model);
  }

  /// A reasoning model's answer: its <think> block is split out as
  /// reasoning; `inside`: the prompt opened the block. Call before the first token.
  void start_reasoning(bool inside) { text_.start_reasoning(inside); }

  void set_prompt_tokens(std::int64_t n) { prompt_tokens_ = n; }
  /// The server's key, for sealed reasoning (Anthropic's thinking signature,
  /// the Responses API's encrypted_content).
  void set_seal(const api::reasoning_seal* seal) { encoder_->set_seal(seal); }
  /// The context edits as the prompt got them (Anthropic's applied_edits).
  void set_applied_edits(std::vector<applied_edit> edits) { encoder_->set_applied_edits(std::move(edits)); }
  /// The stop string that ended the answer (Anthropic's stop_sequence).
  void set_stop_sequence(std::string s) { stop_sequence_ = std::move(s); }
  auto prompt_tokens() const -> std::int64_t { return prompt_tokens_; }
  /// The prompt's prefix-cache figures (api::usage), from its first update.
  void set_cache(std::int64_t cached, std::int64_t written) {
    cached_tokens_ = cached;
    cache_written_tokens_ = written;
  }
  auto usage() const -> api::usage { return {prompt_tokens_, completion_tokens_, cached_tokens_, cache_written_tokens_}; }
  /// One more generated token (before its text is added).
  void count_token() { ++completion_tokens_; }
  auto completion_tokens() const -> std::int64_t { return completion_tokens_; }

  /// What a stream opens with once its head is out ("" for none).
  auto opening() -> std::string { return encoder_->opening(usage()); }
  /// The detokenizer of the choice's tokens, once the prompt is encoded
  /// (text_assembler::start_tokens).
  template <class... Args>
  void start_tokens(bool logprobs, Args&&... args) {
    text_.start_tokens(logprobs, std::forward<Args>(args)...);
  }
  auto detokenizer() -> output_processor& { return text_.detokenizer(); }
  /// One more token (counted), with its logprob (when asked): its text's
  /// events appended to `batch` (streamed) or kept for the whole response.
  /// The detokenizer's delta: its text, and whether (and why) it finished.
  auto add_token(std::string& batch, token_id t, std::optional<api::token_logprob> logprob) -> output_delta {
    count_token();
    return text_.feed_token(t, std::move(logprob), to(batch));
  }
  /// Text not from tokens (an echoed prompt) and its logprobs, as add_token writes it.
  void add_text(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs);
  /// A stream's last write: `batch`, then the finish (and usage) events.
  /// With `tail` false (one of n choices, SSE): the finish event only; the
  /// last choice's end then writes tail().
  auto closing(std::string batch, std::string_view finish_reason, bool tail = true) -> std::string;
  /// What ends a stream of n choices, counting `u`.
  auto tail(const api::usage& u) const -> std::string { return encoder_->tail(u); }
  /// The choice's index in the response (n > 1; best_of ranks them last).
  void set_index(std::int32_t i) {
    head_.index = i;
    encoder_->set_index(i);
  }
  /// The whole response, not streamed.
  auto whole(std::string_view finish_reason) -> std::string;
  /// An error once the stream has started: its event, and the end.
  auto error_closing(const api::api_error& e) -> std::string { return encoder_->error_closing(e); }
  /// A retry from the start on another replica, nothing streamed yet: the
  /// tokens generated so far are forgotten.
  void restart();
  /// The answer as a stored response (the Responses API's store), once
  /// closed; none for other protocols.
  auto stored() const -> std::optional<std::pair<chat_message, std::string>> { return encoder_->stored(); }
  /// A cached answer's tokens (one event each when streaming): counted and
  /// added as add_text would; returns the batch.
  auto replay(const std::vector<std::string>& pieces) -> std::string;

private:
  /// The parsers' last events written, and how the answer ended.
  auto finish(std::string& batch, std::string_view finish_reason) -> output_finish;
  auto to(std::string& batch) -> text_assembler::emit;

  api::response_head head_;
  bool streaming_, sse_;
  std::unique_ptr<api::wire_encoder> encoder_;
  text_assembler text_;
  std::string stop_sequence_;
  std::int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0, cache_written_tokens_ = 0;
};

} // namespace troupe
