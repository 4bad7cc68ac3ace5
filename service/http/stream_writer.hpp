#pragma once
// What a response looks like on the wire, as plain text: the SSE and
// WebSocket framing of a stream, its chunks (token text and logprobs, the
// finish, the usage), the whole response when it is not streamed, an error
// once a stream has started, and a cached answer replayed. The sink actor
// does the I/O (start_stream, write, respond) with what this returns; no CAF,
// no Beast.

#include "service/http/openai_api.hpp"
#include "service/http/response_builder.hpp"
#include "service/tools/reasoning_parser.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class stream_writer {
public:
  /// `ws_id` non-empty: a WebSocket request (GET /v1/chat/stream) with that
  /// id (JSON text); else SSE where body.stream, or one whole response.
  /// `tool_parser`: the tool-call format the text is parsed for (a family of
  /// tools::make_tool_parser), "" for plain text: calls go out as tool_calls
  /// deltas (WebSocket: "tool_call" events), and a stream that made one
  /// finishes "tool_calls".
  stream_writer(const api::completion_request& body, std::string ws_id, api::response_head head,
                std::string_view tool_parser = {});

  auto websocket() const -> bool { return !ws_id_.empty(); }
  /// Sent as it comes (WebSocket or SSE), rather than whole at the end.
  auto streaming() const -> bool { return websocket() || stream_; }
  auto head() const -> const api::response_head& { return head_; }
  void set_model(std::string model) {
    if (responses_) responses_->set_model(model);
    head_.model = std::move(model);
  }

  /// A reasoning model's answer: its <think> block is split out as
  /// reasoning_content (WebSocket: "reasoning" events); `inside`: the prompt
  /// opened the block. Call before the first token.
  void start_reasoning(bool inside);

  void set_prompt_tokens(std::int64_t n) { prompt_tokens_ = n; }
  /// The server's key, for sealed reasoning (Anthropic's thinking signature,
  /// the Responses API's encrypted_content).
  void set_seal(const api::reasoning_seal* seal) {
    seal_ = seal;
    if (responses_) responses_->set_seal(seal);
  }
  /// Anthropic's context edits as the prompt got them (context_management.applied_edits).
  void set_applied_edits(std::vector<applied_edit> edits) { applied_edits_ = std::move(edits); }
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

  /// What a stream opens with once its 200 and headers are out: chat's role
  /// chunk (SSE), or the start event (WebSocket, which has no headers); ""
  /// for a completions stream.
  auto opening() const -> std::string;
  /// One token's text and its logprobs (when asked): a token event
  /// (WebSocket), an SSE chunk appended to `batch`, or more of the whole
  /// text. Text offsets count code points, as OpenAI's do.
  void add_text(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs);
  /// A stream's last write: `batch`, the finish (and usage) events, and
  /// [DONE] for SSE. (Not const: the tool parser gives up what it held.)
  /// With `tail` false (one of n choices, SSE): the finish event only; the
  /// last choice's end then writes tail().
  auto closing(std::string batch, std::string_view finish_reason, bool tail = true) -> std::string;
  /// What ends an SSE stream of n choices: the usage chunk (counting `u`,
  /// when stream_options.include_usage) and [DONE].
  auto tail(const api::usage& u) const -> std::string;
  /// The choice's index in the response (n > 1; best_of ranks them last).
  void set_index(std::int32_t i) { head_.index = i; }
  /// The whole response, not streamed.
  auto whole(std::string_view finish_reason) -> std::string;
  /// An error once the stream has started: its event, and the end.
  auto error_closing(const api::api_error& e) const -> std::string;
  /// A retry from the start on another replica, nothing streamed yet: the
  /// tokens generated so far are forgotten.
  void restart();
  /// A Responses request's answer as it stands (its output items, and the
  /// response object once closed); null for other requests.
  auto response() const -> const api::responses::response_builder* { return responses_.get(); }
  /// A cached answer's tokens (one event each when streaming): counted and
  /// added as add_text would; returns the batch.
  auto replay(const std::vector<std::string>& pieces) -> std::string;

private:
  /// One event appended to `out`: an SSE event, or a WebSocket message (a
  /// line; the connection sends each line as a message).
  void event(std::string& out, std::string_view json) const;
  auto ws_event(std::string_view type) const -> std::string;
  /// What the tool parser said: content and call deltas, written out.
  void emit(std::string& batch, const tools::parse_delta& d, std::vector<api::token_logprob> logprobs);
  void plain_text(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs);
  void content(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs);
  void reasoning(std::string& batch, std::string_view text);
  void flush_parsers(std::string& batch);
  /// Anthropic's stream: a named SSE event; a content block opened (the
  /// open one closed first) or closed.
  void named_event(std::string& out, std::string_view name, std::string_view json) const;
  void open_block(std::string& batch, int kind, const std::string& start_json);
  void close_block(std::string& batch);
  auto final_reason(std::string_view finish_reason) const -> std::string_view;

  api::endpoint kind_;
  bool stream_, include_usage_;
  std::string ws_id_;
  api::response_head head_;
  std::int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0, cache_written_tokens_ = 0;
  std::int64_t text_offset_ = 0;            ///< code points in the settled tokens' bytes
  std::string text_;                        ///< the whole text (not streamed)
  std::vector<api::token_logprob> logprobs_; ///< not streamed, when asked
  bool want_logprobs_;
  std::string tool_family_;
  std::unique_ptr<tools::tool_parser> tools_; ///< set when the text is parsed for tool calls
  std::vector<tools::tool_call> calls_;       ///< not streamed: the calls made
  std::size_t num_calls_ = 0;                 ///< calls begun so far
  std::unique_ptr<tools::reasoning_parser> reasoning_; ///< set for a reasoning model's answers
  bool reasoning_inside_ = false;
  std::string reasoning_text_;                ///< not streamed: the reasoning
  api::wire wire_ = api::wire::openai;
  std::string stop_sequence_;
  bool edits_asked_ = false; ///< Anthropic: context_management given (its applied_edits are written)
  bool omit_thinking_ = false; ///< Anthropic: thinking.display "omitted"
  std::vector<applied_edit> applied_edits_;
  const api::reasoning_seal* seal_ = nullptr;
  std::string block_thinking_; ///< Anthropic's stream: the open thinking block's text (its signature seals it)
  int block_ = 0;        ///< Anthropic's stream: the open block's kind (0: none, 1 text, 2 thinking, 3 tool_use)
  int block_index_ = -1; ///< and its index
  std::unique_ptr<api::responses::response_builder> responses_; ///< wire responses: its items and events
};

} // namespace troupe
