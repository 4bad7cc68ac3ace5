#pragma once
// What a wire protocol provides the request path: how it reads a body, how
// its errors look, and, per choice, an encoder that writes the neutral
// output events as that protocol's stream or whole response. The session
// and its stream writer hold these by interface, so nothing below the
// protocols' folders (service/http/openai, anthropic, responses, websocket)
// branches on which protocol a request came through.

#include "base/types.hpp"
#include "engine/tokenizer/context_edits.hpp"
#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"
#include "service/request/output_event.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::api {

class reasoning_seal;

/// One choice's answer, written. Streamed: each call returns or appends
/// the protocol's events; whole: the pieces are kept for whole().
class wire_encoder {
public:
  virtual ~wire_encoder() = default;
  virtual void set_model(std::string model) = 0;
  virtual void set_index(std::int32_t index) = 0;
  /// The server's key, for sealed reasoning (a thinking signature, encrypted_content).
  virtual void set_seal(const reasoning_seal*) {}
  /// The prompt's context edits as applied (Anthropic's applied_edits).
  virtual void set_applied_edits(std::vector<applied_edit>) {}
  /// What the stream opens with once its head is out ("" for none).
  virtual auto opening(const usage& u) -> std::string = 0;
  /// Events of one step of the text, appended to `batch` (streamed) or kept;
  /// `tokens`: the choice's tokens so far.
  virtual void write(std::string& batch, std::span<const output_event> events, std::int64_t tokens) = 0;
  /// A stream's last write: `batch`, then the finish (and usage) events.
  /// `tail` false: one of n choices, whose last writes tail() instead.
  virtual auto closing(std::string batch, const output_finish& f, const usage& u, bool tail) -> std::string = 0;
  /// What ends a stream of n choices (OpenAI's SSE: the usage chunk and [DONE]).
  virtual auto tail(const usage&) const -> std::string { return {}; }
  /// The whole response, not streamed.
  virtual auto whole(const output_finish& f, const usage& u) -> std::string = 0;
  /// An error once the stream has started: its event, and the end.
  virtual auto error_closing(const api_error& e) -> std::string = 0;
  /// Back to nothing written (a retry on another replica).
  virtual void restart() = 0;
  /// The answer as a stored response (the Responses API's store): the
  /// conversation's next message and the response object; none elsewhere.
  virtual auto stored() const -> std::optional<std::pair<chat_message, std::string>> { return std::nullopt; }
};

/// A wire protocol, one object per request: it reads the body (keeping
/// what only it needs, such as the fields it echoes) and makes the
/// request's encoders.
class wire_protocol {
public:
  virtual ~wire_protocol() = default;
  /// Its name where unknown fields are reported: "openai", "anthropic", "responses".
  virtual auto name() const -> std::string_view = 0;
  /// Reads a body with the model's generation defaults.
  virtual auto parse(std::string_view body, const sampling_params& defaults)
      -> std::variant<generation_request, api_error> = 0;
  /// Its error body, for an error before any stream started.
  virtual auto error_body(const api_error& e) const -> std::string = 0;
  /// The response's id, from the request's x-request-id.
  virtual auto response_id(const generation_request& r, const std::string& request_id) const -> std::string = 0;
  /// A stream goes out as SSE after a 200 and its headers (a WebSocket's
  /// events have no head).
  virtual auto sse() const -> bool { return true; }
  /// The answer is sent as it comes.
  virtual auto streams(const generation_request& r) const -> bool { return r.stream; }
  /// One choice's encoder.
  virtual auto encoder(const generation_request& r, response_head head) const -> std::unique_ptr<wire_encoder> = 0;
  /// One response of n choices from their whole responses (the order
  /// given) and the total usage; only OpenAI's APIs have n.
  virtual auto combine(const std::vector<std::string>& wholes, const usage&) const -> std::string {
    return wholes.front();
  }
};

} // namespace troupe::api
