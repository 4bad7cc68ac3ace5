// Anthropic's Messages API as a wire protocol: a body read with its own
// settings kept (thinking.display "omitted"), and a choice's answer written
// as Messages' event stream (message_start; thinking, text and tool_use
// content blocks with their deltas, the thinking block sealed by its
// signature; message_delta with the stop reason and usage; message_stop),
// as one message when not streamed, and an error event once streaming.

#include "service/http/anthropic/anthropic_protocol.hpp"

#include "service/http/reasoning_seal.hpp"
#include "service/request/stream_writer.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <string>
#include <vector>

using namespace troupe;

namespace {

struct sse_event {
  std::string name, data;
};

/// An SSE text's named events.
auto events(const std::string& text) -> std::vector<sse_event> {
  std::vector<sse_event> out;
  for (std::size_t at = 0; at < text.size();) {
    REQUIRE(text.compare(at, 7, "event: ") == 0);
    const auto nl = text.find('\n', at);
    const auto end = text.find("\n\n", nl);
    REQUIRE(text.compare(nl + 1, 6, "data: ") == 0);
    out.push_back({text.substr(at + 7, nl - at - 7), text.substr(nl + 7, end - nl - 7)});
    at = end + 2;
  }
  return out;
}

auto field(const std::string& json, std::string_view pointer) -> std::string {
  static simdjson::dom::parser parser;
  simdjson::dom::element e;
  REQUIRE(parser.parse(json).get(e) == simdjson::SUCCESS);
  auto at = e.at_pointer(pointer);
  if (at.error()) return "(absent)";
  std::string_view s;
  if (at.get(s) == simdjson::SUCCESS) return std::string(s);
  return simdjson::minify(at.value());
}

auto parsed(api::anthropic_protocol& p, const std::string& extra, bool stream) -> api::generation_request {
  auto r = p.parse(R"({"model":"qwen","max_tokens":4096,"stream":)" + std::string(stream ? "true" : "false") +
                       R"(,"messages":[{"role":"user","content":"hi"}])" + extra + "}",
                   sampling_params{});
  REQUIRE(std::holds_alternative<api::generation_request>(r));
  return std::get<api::generation_request>(std::move(r));
}

const std::vector<std::string> k_pieces = {"<think>Let me", " look.</think>", "Sure. <tool_call>\n{\"name\": \"f\", ",
                                           "\"arguments\": {\"x\": 1}}\n</tool_call>"};

} // namespace

TEST_CASE("streamed: thinking, text and tool_use blocks in order, the thinking sealed, the stop reason tool_use") {
  api::anthropic_protocol p;
  const auto body = parsed(p, "", true);
  CHECK(p.name() == "anthropic");
  const api::response_head head{p.response_id(body, "r9"), 1700000000, "qwen"};
  CHECK(head.id == "chatcmpl-r9");
  const api::reasoning_seal seal;
  stream_writer w(p, body, head, "hermes");
  CHECK(w.sse());
  CHECK(w.streaming());
  w.set_seal(&seal);
  w.start_reasoning(false);
  w.set_prompt_tokens(5);
  std::string out = w.opening();
  for (const auto& piece : k_pieces) {
    w.count_token();
    w.add_text(out, piece, {});
  }
  out = w.closing(std::move(out), "stop");
  const auto ev = events(out);
  REQUIRE(ev.size() >= 9);
  CHECK(ev.front().name == "message_start");
  CHECK(field(ev.front().data, "/message/id") == "msg_chatcmpl-r9");
  CHECK(field(ev.front().data, "/message/usage/input_tokens") == "5");
  std::vector<std::string> blocks, thinking_deltas;
  std::string text, json, signature;
  for (const auto& e : ev) {
    if (e.name == "content_block_start") blocks.push_back(field(e.data, "/content_block/type"));
    if (e.name != "content_block_delta") continue;
    const auto kind = field(e.data, "/delta/type");
    if (kind == "thinking_delta") thinking_deltas.push_back(field(e.data, "/delta/thinking"));
    if (kind == "text_delta") text += field(e.data, "/delta/text");
    if (kind == "input_json_delta") json += field(e.data, "/delta/partial_json");
    if (kind == "signature_delta") signature = field(e.data, "/delta/signature");
  }
  CHECK(blocks == std::vector<std::string>{"thinking", "text", "tool_use"});
  std::string thinking;
  for (const auto& t : thinking_deltas) thinking += t;
  CHECK(thinking == "Let me look.");
  CHECK(seal.open(signature) == std::optional<std::string>("Let me look."));
  CHECK(text == "Sure. ");
  CHECK(json == R"({"x": 1})");
  const auto& delta = ev[ev.size() - 2];
  CHECK(delta.name == "message_delta");
  CHECK(field(delta.data, "/delta/stop_reason") == "tool_use");
  CHECK(field(delta.data, "/usage/output_tokens") == "4");
  CHECK(ev.back().name == "message_stop");
  // Once streaming, an error is Anthropic's error event.
  const auto err = events(w.error_closing({503, "the replica failed", "service_unavailable", "", ""}));
  REQUIRE(err.size() == 1);
  CHECK(err[0].name == "error");
  CHECK(field(err[0].data, "/type") == "error");
}

TEST_CASE("omitted thinking: the signature alone; whole, one message with its stop sequence") {
  api::anthropic_protocol p;
  auto body = parsed(p, R"(,"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted"})", true);
  const api::response_head head{"chatcmpl-1", 1700000000, "qwen"};
  stream_writer w(p, body, head);
  w.start_reasoning(false);
  std::string out = w.opening();
  w.count_token();
  w.add_text(out, "<think>secret</think>Hi", {});
  out = w.closing(std::move(out), "stop");
  CHECK(out.find("thinking_delta") == std::string::npos);
  CHECK(out.find("signature_delta") != std::string::npos);
  CHECK(out.find("secret") == std::string::npos);

  body = parsed(p, R"(,"stop_sequences":["END"])", false);
  stream_writer whole(p, body, head);
  CHECK_FALSE(whole.streaming());
  whole.count_token();
  std::string ignored;
  whole.add_text(ignored, "Hello", {});
  whole.set_stop_sequence("END");
  const auto message = whole.whole("stop");
  CHECK(field(message, "/type") == "message");
  CHECK(field(message, "/content/0/text") == "Hello");
  CHECK(field(message, "/stop_reason") == "stop_sequence");
  CHECK(field(message, "/stop_sequence") == "END");
  CHECK(p.error_body({400, "bad", "invalid_request_error", "", ""}).find(R"("type":"error")") != std::string::npos);
}
