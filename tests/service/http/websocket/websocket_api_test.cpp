// The WebSocket chat protocol: a message's envelope (type, id) read apart
// from its chat request, its errors as error events, a chat request that
// always streams without the usage option, and an answer as line events
// (start, numbered tokens, tool calls, done with usage).

#include "service/http/websocket/websocket_api.hpp"

#include "service/request/stream_writer.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace troupe;
using namespace troupe::api;

TEST_CASE("the envelope: type (chat by default) and id (a string or an integer, as JSON); errors are 400s") {
  const auto chat = parse_ws_envelope(R"({"id":"q1","messages":[]})");
  REQUIRE(std::holds_alternative<ws_envelope>(chat));
  CHECK(std::get<ws_envelope>(chat).type == "chat");
  CHECK(std::get<ws_envelope>(chat).id_json == R"("q1")");
  const auto numbered = parse_ws_envelope(R"({"type":"cancel","id":7})");
  REQUIRE(std::holds_alternative<ws_envelope>(numbered));
  CHECK(std::get<ws_envelope>(numbered).type == "cancel");
  CHECK(std::get<ws_envelope>(numbered).id_json == "7");
  const auto auth = parse_ws_envelope(R"({"type":"auth","api_key":"k"})");
  REQUIRE(std::holds_alternative<ws_envelope>(auth));
  CHECK(std::get<ws_envelope>(auth).api_key == "k");
  const auto bad_id = parse_ws_envelope(R"({"id":[1]})");
  REQUIRE(std::holds_alternative<api_error>(bad_id));
  CHECK(std::get<api_error>(bad_id).param == "id");
  const auto bad_type = parse_ws_envelope(R"({"type":"dance"})");
  REQUIRE(std::holds_alternative<api_error>(bad_type));
  CHECK(std::get<api_error>(bad_type).code == "invalid_value");
  CHECK(std::holds_alternative<api_error>(parse_ws_envelope("[1]")));
}

TEST_CASE("an error event carries the id, the status and the error's body") {
  CHECK(ws_error_event(R"("q1")", 429, R"({"error":{"message":"slow down"}})", R"("retry_after_s":1)") ==
        R"({"type":"error","id":"q1","status":429,"retry_after_s":1,"error":{"message":"slow down"}})");
  CHECK(ws_error_event("", 400, R"({"error":{}})") == R"({"type":"error","id":null,"status":400,"error":{}})");
}

TEST_CASE("a chat message always streams, as line events with the message's id") {
  websocket_protocol p(R"("q2")");
  auto parsed = p.parse(R"({"id":"q2","type":"chat","messages":[{"role":"user","content":"hi"}],"stream":false,)"
                        R"("max_tokens":4})",
                        sampling_params{});
  REQUIRE(std::holds_alternative<generation_request>(parsed));
  const auto& body = std::get<generation_request>(parsed);
  CHECK(body.stream);
  CHECK_FALSE(body.include_usage);
  CHECK_FALSE(p.sse());
  const response_head head{p.response_id(body, "r1"), 1700000000, "tiny"};
  CHECK(head.id == "chatcmpl-r1");
  stream_writer w(p, body, head);
  CHECK(w.streaming());
  std::string out = w.opening();
  CHECK(out == R"({"type":"start","id":"q2","model":"tiny"})" "\n");
  out.clear();
  w.set_prompt_tokens(3);
  w.count_token();
  w.add_text(out, "Hello", {});
  CHECK(out == R"({"type":"token","id":"q2","n":1,"text":"Hello"})" "\n");
  out = w.closing({}, "length");
  CHECK(out == R"({"type":"done","id":"q2","model":"tiny","finish_reason":"length",)"
               R"("usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})" "\n");
  CHECK(w.error_closing({503, "gone", "service_unavailable", "", ""}).starts_with(R"({"type":"error","id":"q2","status":503,)"));
}
