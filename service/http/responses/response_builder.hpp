#pragma once
// A Responses API answer as it is written (POST /v1/responses): the
// response object's output items, built from the answer's pieces as they
// come, and the typed SSE events that tell them when streamed.

#include "service/http/reasoning_seal.hpp"
#include "service/http/responses/responses_api.hpp"
#include "service/request/wire_encoder.hpp"
#include "service/tools/tool_parser.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::api::responses {

/// A response as it is written: its output items in order (reasoning,
/// message, function calls), built from the answer's pieces as they come,
/// and the SSE events that tell them (response.created ... response.completed)
/// when streamed.
class response_builder final : public wire_encoder {
public:
  /// `r` and `fields`: the request (its echoed fields); `stream`: events are written.
  response_builder(const generation_request& r, const responses_fields& fields, response_head head, bool stream);

  void set_model(std::string model) override { head_.model = std::move(model); }
  void set_index(std::int32_t index) override { head_.index = index; }
  /// The server's key, for reasoning items' encrypted_content (include: reasoning.encrypted_content).
  void set_seal(const reasoning_seal* seal) override { seal_ = seal; }
  /// Back to nothing written (a retry on another replica).
  void restart() override {
    sequence_ = 0;
    items_.clear();
    final_json_.clear();
  }
  /// response.created and response.in_progress.
  auto opening(const usage& u) -> std::string override;
  void write(std::string& batch, std::span<const output_event> events, std::int64_t tokens) override;
  /// The open item closed, and response.completed (or response.incomplete,
  /// at max_output_tokens).
  auto closing(std::string batch, const output_finish& f, const usage& u, bool tail) -> std::string override;
  /// The whole response object (not streamed).
  auto whole(const output_finish& f, const usage& u) -> std::string override;
  /// An "error" event, once the stream has started.
  auto error_closing(const api_error& e) -> std::string override;
  /// The answer as the conversation's next message, and the response object
  /// as last written (closing or whole), kept for GET /v1/responses/{id}.
  auto stored() const -> std::optional<std::pair<chat_message, std::string>> override;

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

  void calls(std::string& batch, const std::vector<tools::call_delta>& calls);
  auto answer() const -> chat_message;

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
