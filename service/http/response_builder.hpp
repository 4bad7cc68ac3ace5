#pragma once
// A Responses API answer as it is written (POST /v1/responses): the
// response object's output items, built from the answer's pieces as they
// come, and the typed SSE events that tell them when streamed.

#include "service/http/openai_api.hpp"
#include "service/http/reasoning_seal.hpp"
#include "service/tools/tool_parser.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::api::responses {

/// A response as it is written: its output items in order (reasoning,
/// message, function calls), built from the answer's pieces as they come,
/// and the SSE events that tell them (response.created ... response.completed)
/// when streamed.
class response_builder {
public:
  /// `body`: the request (its echoed fields); `stream`: events are written.
  response_builder(const completion_request& body, response_head head, bool stream);

  void set_model(std::string model) { head_.model = std::move(model); }
  /// The server's key, for reasoning items' encrypted_content (include: reasoning.encrypted_content).
  void set_seal(const reasoning_seal* seal) { seal_ = seal; }
  /// Back to nothing written (a retry on another replica).
  void reset() {
    sequence_ = 0;
    items_.clear();
    final_json_.clear();
  }
  /// response.created and response.in_progress.
  auto opening() -> std::string;
  void text(std::string& batch, std::string_view text) { append(batch, item::kind::message, text); }
  void reasoning(std::string& batch, std::string_view text) { append(batch, item::kind::reasoning, text); }
  void calls(std::string& batch, const std::vector<tools::call_delta>& calls);
  /// The open item closed, and response.completed (or response.incomplete,
  /// at max_output_tokens).
  auto closing(std::string batch, std::string_view finish_reason, const usage& u) -> std::string;
  /// The whole response object (not streamed).
  auto whole(std::string_view finish_reason, const usage& u) -> std::string;
  /// An "error" event, once the stream has started.
  auto error_event(const api_error& e) -> std::string;

  /// The answer as the conversation's next message (for the response store).
  auto answer() const -> chat_message;
  /// The response object as last written (closing or whole): kept for
  /// GET /v1/responses/{id}.
  auto final_json() const -> const std::string& { return final_json_; }

private:
  struct item {
    enum class kind { reasoning, message, function_call } what;
    std::string id;
    std::string text; ///< the message's text, the reasoning, or the call's arguments
    std::string call_id, name;
    bool done = false;
  };
  void event(std::string& out, std::string_view type, std::string body);
  /// `text` added to the open item of kind k (message or reasoning), and its delta event.
  void append(std::string& batch, item::kind k, std::string_view text);
  /// The open item of kind k, opened (the one before closed) when the last
  /// is another; a function call always opens a new one.
  auto open(std::string& batch, item::kind k, std::string_view call_id = {}, std::string_view name = {}) -> item&;
  void close(std::string& batch, bool complete);
  auto item_json(const item& it, bool complete) const -> std::string;
  /// A call's ,"name" (and ,"namespace") fields.
  auto called(std::string_view name) const -> std::string;
  auto response_json(std::string_view status, std::string_view finish_reason, const usage* u, bool complete) const
      -> std::string;

  response_head head_;
  responses_fields echo_;
  std::int64_t max_output_tokens_ = 0; ///< 0: none given
  float temperature_, top_p_;
  bool parallel_tool_calls_;
  std::string user_;
  bool stream_;
  std::int64_t sequence_ = 0;
  std::vector<item> items_;
  std::string final_json_;
  const reasoning_seal* seal_ = nullptr;
};

} // namespace troupe::api::responses
