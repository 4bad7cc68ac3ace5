#pragma once
// The WebSocket chat protocol (GET /v1/chat/stream): each message an
// envelope (type, id) around a chat request, which openai_api.hpp reads,
// and each answer a series of JSON events, one message each: start,
// token, reasoning, tool_call, done or error.

#include "service/request/wire_encoder.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <variant>

namespace troupe::api {

/// A WebSocket message's envelope: its type and id; a chat request's
/// other fields are read by parse_request(chat, ..., ws_message = true).
struct ws_envelope {
  std::string type;    ///< "chat" (the default), "cancel", "ping", "auth"
  std::string id_json; ///< the id as JSON text (a string or an integer); "" when absent
  std::string api_key; ///< "auth"
};

/// Reads type, id and api_key; other fields are left for parse_request.
/// Errors (status 400): not a JSON object, an id that is not a string or an
/// integer, an unknown type.
[[nodiscard]] auto parse_ws_envelope(std::string_view text) -> std::variant<ws_envelope, api_error>;

/// A WebSocket error event: {"type":"error","id":ID (null when ""),
/// "status":S[,more],"error":{...}}, from an error_body() text; `more` is
/// extra fields ("\"retry_after_s\":1") or "".
auto ws_error_event(std::string_view id_json, int status, std::string_view error_body, std::string_view more = {})
    -> std::string;

/// One chat message on the socket, whose id (JSON text) every event repeats.
/// It always streams, without the usage chunk's option.
class websocket_protocol final : public wire_protocol {
public:
  explicit websocket_protocol(std::string id_json) : id_json_(std::move(id_json)) {}
  auto name() const -> std::string_view override { return "openai"; }
  auto parse(std::string_view body, const sampling_params& defaults)
      -> std::variant<generation_request, api_error> override;
  auto error_body(const api_error& e) const -> std::string override;
  auto response_id(const generation_request& r, const std::string& request_id) const -> std::string override;
  auto sse() const -> bool override { return false; }
  auto streams(const generation_request&) const -> bool override { return true; }
  auto encoder(const generation_request& r, response_head head) const -> std::unique_ptr<wire_encoder> override;

private:
  std::string id_json_;
};

/// An answer's events, each a line (the connection sends each as a message).
class websocket_encoder final : public wire_encoder {
public:
  websocket_encoder(std::string id_json, response_head head) : id_json_(std::move(id_json)), head_(std::move(head)) {}
  void set_model(std::string model) override { head_.model = std::move(model); }
  void set_index(std::int32_t index) override { head_.index = index; }
  auto opening(const usage& u) -> std::string override;
  void write(std::string& batch, std::span<const output_event> events, std::int64_t tokens) override;
  auto closing(std::string batch, const output_finish& f, const usage& u, bool tail) -> std::string override;
  auto whole(const output_finish& f, const usage& u) -> std::string override { return closing({}, f, u, true); }
  auto error_closing(const api_error& e) -> std::string override;
  void restart() override {}

private:
  auto event(std::string_view type) const -> std::string;

  std::string id_json_;
  response_head head_;
};

} // namespace troupe::api
