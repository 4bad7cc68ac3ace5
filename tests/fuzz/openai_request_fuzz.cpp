// libFuzzer harness (make fuzz): the request parsers on any bytes, as a
// completions body, a chat body, a WebSocket chat message, a WebSocket
// envelope, an Anthropic Messages body (and count_tokens'), a Responses API body, and a sealed
// reasoning text to open. Every input must give a request or a 4xx error (a text: nothing), never
// a crash.

#include "service/http/anthropic/anthropic_api.hpp"
#include "service/http/openai/openai_api.hpp"
#include "service/http/websocket/websocket_api.hpp"
#include "service/http/reasoning_seal.hpp"
#include "service/http/responses/responses_api.hpp"
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  static const troupe::sampling_params defaults{};
  (void)troupe::api::parse_request(troupe::api::endpoint::completions, body, defaults);
  (void)troupe::api::parse_request(troupe::api::endpoint::chat, body, defaults);
  (void)troupe::api::parse_request(troupe::api::endpoint::chat, body, defaults, true);
  (void)troupe::api::parse_ws_envelope(body);
  (void)troupe::api::anthropic::parse_request(body, defaults);
  (void)troupe::api::anthropic::parse_request(body, defaults, nullptr, true);
  static const troupe::api::reasoning_seal seal;
  (void)seal.open(body);
  (void)troupe::api::responses::parse_request(body, defaults);
  return 0;
}
