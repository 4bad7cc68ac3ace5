// A response on the wire (service/request/stream_writer, with each
// protocol's encoder): SSE and WebSocket
// framing, chunks, the finish and usage, the whole response, an error once
// streaming, a cached answer replayed, a retry. The JSON is read back with
// simdjson, so each event is checked as a client parses it.

#include "service/request/stream_writer.hpp"

#include "service/http/openai/openai_format.hpp"
#include "service/http/openai/openai_protocol.hpp"
#include "service/http/responses/responses_protocol.hpp"
#include "service/http/websocket/websocket_api.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace troupe;

namespace {

auto request(api::endpoint kind, bool stream, bool include_usage = false, bool logprobs = false)
    -> api::generation_request {
  api::generation_request r;
  r.kind = kind;
  r.stream = stream;
  r.include_usage = include_usage;
  r.want_logprobs = logprobs;
  return r;
}

const api::response_head k_head{"cmpl-7", 1700000000, "tiny"};

/// A choice's writer in OpenAI's protocol (the request's endpoint), or, with
/// an id, the WebSocket's.
auto writer(const api::generation_request& body, const std::string& ws_id, api::response_head head,
            std::string_view tool_parser = {}) -> stream_writer {
  if (!ws_id.empty()) return stream_writer(api::websocket_protocol(ws_id), body, std::move(head), tool_parser);
  return stream_writer(api::openai_protocol(body.kind), body, std::move(head), tool_parser);
}

/// The events of an SSE text: each "data: X\n\n"'s X.
auto sse_events(const std::string& text) -> std::vector<std::string> {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    REQUIRE(text.compare(at, 6, "data: ") == 0);
    const auto end = text.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    out.push_back(text.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return out;
}

/// A WebSocket text's messages: one per line.
auto lines(const std::string& text) -> std::vector<std::string> {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto end = text.find('\n', at);
    REQUIRE(end != std::string::npos);
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

auto json(const std::string& text) -> simdjson::dom::element {
  static simdjson::dom::parser parser; // (one document alive at a time, as used here)
  simdjson::dom::element e;
  REQUIRE(parser.parse(text).get(e) == simdjson::SUCCESS);
  return e;
}

auto str(simdjson::dom::element e) -> std::string { return std::string(e.get_string().value()); }

} // namespace

TEST_CASE("SSE chat: the role chunk, content chunks, the finish, usage, [DONE]") {
  auto w = writer(request(api::endpoint::chat, true, true), "", k_head);
  CHECK(w.streaming());
  CHECK(w.sse());
  const auto opening = sse_events(w.opening());
  REQUIRE(opening.size() == 1);
  CHECK(str(json(opening[0])["choices"].at(0)["delta"]["role"]) == "assistant");
  w.set_prompt_tokens(5);
  std::string batch;
  w.count_token();
  w.add_text(batch, "Hel", {});
  w.count_token();
  w.add_text(batch, "", {}); // an unsettled byte piece: nothing to send
  w.count_token();
  w.add_text(batch, "lo", {});
  const auto events = sse_events(w.closing(batch, "length"));
  REQUIRE(events.size() == 5);
  CHECK(str(json(events[0])["choices"].at(0)["delta"]["content"]) == "Hel");
  CHECK(json(events[0])["usage"].is_null()); // with include_usage, every chunk's usage is null
  CHECK(str(json(events[1])["choices"].at(0)["delta"]["content"]) == "lo");
  CHECK(str(json(events[2])["choices"].at(0)["finish_reason"]) == "length");
  CHECK(json(events[3])["usage"]["completion_tokens"].get_int64().value() == 3);
  CHECK(json(events[3])["usage"]["total_tokens"].get_int64().value() == 8);
  CHECK(events[4] == "[DONE]");
}

TEST_CASE("SSE completions: no opening chunk; logprobs' text offsets count code points") {
  auto w = writer(request(api::endpoint::completions, true, false, true), "", k_head);
  CHECK(w.opening().empty());
  std::string batch;
  api::token_logprob e, x;
  e.token = "\xc3\xa9"; // é: two bytes, one code point
  e.logprob = -0.5f;
  x.token = "x";
  x.logprob = -1.0f;
  w.count_token();
  w.add_text(batch, "\xc3\xa9", {e});
  w.count_token();
  w.add_text(batch, "x", {x});
  const auto events = sse_events(w.closing(batch, "stop"));
  REQUIRE(events.size() == 4);
  CHECK(json(events[0])["choices"].at(0)["logprobs"]["text_offset"].at(0).get_int64().value() == 0);
  CHECK(json(events[1])["choices"].at(0)["logprobs"]["text_offset"].at(0).get_int64().value() == 1);
  CHECK(str(json(events[2])["choices"].at(0)["finish_reason"]) == "stop");
  CHECK(events[3] == "[DONE]");
}

TEST_CASE("WebSocket: a start event, numbered tokens, done with usage; no [DONE]; an error event") {
  auto w = writer(request(api::endpoint::chat, false), "\"q1\"", k_head);
  CHECK_FALSE(w.sse());
  CHECK(w.streaming()); // a WebSocket request always streams
  const auto start = lines(w.opening());
  REQUIRE(start.size() == 1);
  CHECK(str(json(start[0])["type"]) == "start");
  CHECK(str(json(start[0])["id"]) == "q1");
  CHECK(str(json(start[0])["model"]) == "tiny");
  w.set_prompt_tokens(2);
  std::string batch;
  w.count_token();
  w.add_text(batch, "Hi", {});
  w.count_token();
  w.add_text(batch, "!", {});
  const auto messages = lines(w.closing(batch, "stop"));
  REQUIRE(messages.size() == 3);
  CHECK(str(json(messages[0])["type"]) == "token");
  CHECK(json(messages[0])["n"].get_int64().value() == 1);
  CHECK(json(messages[1])["n"].get_int64().value() == 2);
  CHECK(str(json(messages[2])["type"]) == "done");
  CHECK(str(json(messages[2])["finish_reason"]) == "stop");
  CHECK(json(messages[2])["usage"]["total_tokens"].get_int64().value() == 4);
  api::api_error err;
  err.status = 503;
  err.message = "the replica serving the request failed mid-stream";
  err.type = "service_unavailable";
  const auto failed = lines(w.error_closing(err));
  REQUIRE(failed.size() == 1);
  CHECK(str(json(failed[0])["type"]) == "error");
  CHECK(json(failed[0])["status"].get_int64().value() == 503);
  CHECK(str(json(failed[0])["error"]["message"]) == err.message);
}

TEST_CASE("not streamed: the whole text and logprobs in one response; a retry forgets what came before") {
  auto w = writer(request(api::endpoint::completions, false, false, true), "", k_head);
  CHECK_FALSE(w.streaming());
  std::string batch;
  api::token_logprob lp;
  lp.token = "a";
  w.count_token();
  w.add_text(batch, "a", {lp});
  w.restart(); // the replica failed before the answer went out
  CHECK(w.completion_tokens() == 0);
  w.count_token();
  w.add_text(batch, "Hello", {lp});
  w.count_token();
  w.add_text(batch, " world", {lp});
  CHECK(batch.empty());
  w.set_prompt_tokens(3);
  const auto body = json(w.whole("stop"));
  CHECK(str(body["choices"].at(0)["text"]) == "Hello world");
  CHECK(body["choices"].at(0)["logprobs"]["tokens"].get_array().size() == 2);
  CHECK(body["usage"]["completion_tokens"].get_int64().value() == 2);
  CHECK(body["usage"]["prompt_tokens"].get_int64().value() == 3);
  // An error before anything went out is the sink's plain response; once a
  // stream started, it is an event and [DONE].
  auto sse = writer(request(api::endpoint::completions, true), "", k_head);
  api::api_error err;
  err.status = 400;
  err.message = "bad";
  const auto events = sse_events(sse.error_closing(err));
  REQUIRE(events.size() == 2);
  CHECK(str(json(events[0])["error"]["message"]) == "bad");
  CHECK(events[1] == "[DONE]");
}

TEST_CASE("a cached answer replayed: one event per stored token, counted, as it streamed first") {
  auto w = writer(request(api::endpoint::chat, true), "", k_head);
  const auto batch = w.replay({"The", " sky", "", " is blue"});
  CHECK(w.completion_tokens() == 4);
  const auto events = sse_events(batch);
  REQUIRE(events.size() == 3); // the empty piece sends nothing
  CHECK(str(json(events[1])["choices"].at(0)["delta"]["content"]) == " sky");
  auto whole = writer(request(api::endpoint::chat, false), "", k_head);
  CHECK(whole.replay({"The", " sky"}).empty());
  CHECK(str(json(whole.whole("stop"))["choices"].at(0)["message"]["content"]) == "The sky");
}

TEST_CASE("reasoning and tool calls: split out and written as OpenAI's deltas, or whole") {
  const api::response_head head{"chatcmpl-9", 1700000000, "qwen"};
  const std::vector<std::string> pieces = {"<thi", "nk>Let me", " call it.</thi", "nk>\n\nOK <tool_call>\n{\"name\": \"f\", ",
                                           "\"arguments\": {\"x\": 1}}\n</tool_call>"};
  // Streamed (SSE): reasoning deltas, content, then the call's id and name before its arguments.
  auto s = writer(request(api::endpoint::chat, true), "", head, "hermes");
  s.start_reasoning(false);
  std::string batch = s.opening();
  for (const auto& p : pieces) {
    s.count_token();
    s.add_text(batch, p, {});
  }
  batch = s.closing(std::move(batch), "stop");
  std::string reasoning, content, arguments, name, id;
  std::string finish;
  for (const auto& e : sse_events(batch)) {
    if (e == "[DONE]") continue;
    const auto choice = json(e)["choices"].at(0);
    const auto delta = choice["delta"];
    std::string_view v;
    if (delta["reasoning_content"].get(v) == simdjson::SUCCESS) reasoning += v;
    if (delta["content"].get(v) == simdjson::SUCCESS) content += v;
    simdjson::dom::array calls;
    if (delta["tool_calls"].get(calls) == simdjson::SUCCESS)
      for (auto c : calls) {
        CHECK(c["index"].get_int64().value() == 0);
        if (c["id"].get(v) == simdjson::SUCCESS) {
          CHECK(arguments.empty()); // the id and name come first
          id = v;
          name = std::string(c["function"]["name"].get_string().value());
        }
        arguments += c["function"]["arguments"].get_string().value();
      }
    if (choice["finish_reason"].get(v) == simdjson::SUCCESS) finish = v;
  }
  CHECK(reasoning == "Let me call it.");
  CHECK(content == "\n\nOK ");
  CHECK(name == "f");
  CHECK(id.starts_with("call_"));
  CHECK(id.size() == 29);
  CHECK(arguments == R"({"x": 1})");
  CHECK(finish == "tool_calls");

  // Whole: the same, as one message.
  auto w = writer(request(api::endpoint::chat, false), "", head, "hermes");
  w.start_reasoning(false);
  std::string ignored;
  for (const auto& p : pieces) w.add_text(ignored, p, {});
  const auto body = w.whole("stop");
  const auto m = json(body)["choices"].at(0)["message"];
  CHECK(m["reasoning_content"].get_string().value() == "Let me call it.");
  CHECK(m["content"].get_string().value() == "\n\nOK ");
  CHECK(m["tool_calls"].at(0)["function"]["arguments"].get_string().value() == R"({"x": 1})");
  CHECK(m["tool_calls"].at(0)["id"].get_string().value() == id); // the same response id, the same call id
  CHECK(json(body)["choices"].at(0)["finish_reason"].get_string().value() == "tool_calls");

  // WebSocket: reasoning and tool_call events.
  auto ws = writer(request(api::endpoint::chat, true), "\"r1\"", head, "hermes");
  ws.start_reasoning(false);
  std::string out;
  for (const auto& p : pieces) ws.add_text(out, p, {});
  out = ws.closing(std::move(out), "stop");
  std::vector<std::string> types;
  for (const auto& l : lines(out)) types.emplace_back(json(l)["type"].get_string().value());
  CHECK(std::count(types.begin(), types.end(), "reasoning") >= 1);
  CHECK(std::count(types.begin(), types.end(), "tool_call") >= 2);
  CHECK(types.back() == "done");
}

TEST_CASE("the Responses API: typed events numbered in order, items in order, the same response whole") {
  const api::response_head head{"resp_0123456789abcdef0123456789abcdef", 1700000000, "qwen"};
  const std::vector<std::string> pieces = {"<think>Hm", "m.</think>", "Sure. <tool_call>\n{\"name\": \"f\", ",
                                           "\"arguments\": {\"x\": 1}}\n</tool_call>"};
  auto body = request(api::endpoint::chat, true);
  api::responses_protocol responses;
  responses.fields().id = head.id;
  responses.fields().tools_json = R"([{"type":"function","name":"f"}])";
  // Streamed: each SSE event named as its "type", numbered from 0.
  stream_writer s(responses, body, head, "hermes");
  s.start_reasoning(false);
  s.set_prompt_tokens(7);
  std::string batch = s.opening();
  for (const auto& p : pieces) {
    s.count_token();
    s.add_text(batch, p, {});
  }
  batch = s.closing(std::move(batch), "stop");
  std::vector<std::string> types;
  std::string reasoning, text, arguments, final_response;
  std::int64_t sequence = 0;
  for (std::size_t at = 0; at < batch.size();) {
    REQUIRE(batch.compare(at, 7, "event: ") == 0);
    const auto name_end = batch.find('\n', at);
    const auto name = batch.substr(at + 7, name_end - at - 7);
    REQUIRE(batch.compare(name_end + 1, 6, "data: ") == 0);
    const auto end = batch.find("\n\n", name_end);
    const auto data = batch.substr(name_end + 7, end - name_end - 7);
    at = end + 2;
    const auto e = json(data);
    CHECK(e["type"].get_string().value() == name);
    CHECK(e["sequence_number"].get_int64().value() == sequence++);
    types.push_back(name);
    std::string_view v;
    if (name == "response.reasoning_text.delta") reasoning += e["delta"].get_string().value();
    if (name == "response.output_text.delta") text += e["delta"].get_string().value();
    if (name == "response.function_call_arguments.delta") arguments += e["delta"].get_string().value();
    if (name == "response.output_item.added" && e["item"]["type"].get(v) == simdjson::SUCCESS && v == "function_call") {
      CHECK(arguments.empty()); // the call's name and id come before its arguments
      CHECK(e["item"]["name"].get_string().value() == "f");
    }
    if (name == "response.completed") final_response = std::string(simdjson::minify(e["response"]));
  }
  CHECK(types.front() == "response.created");
  CHECK(types[1] == "response.in_progress");
  CHECK(types.back() == "response.completed");
  CHECK(std::count(types.begin(), types.end(), "response.output_item.added") == 3);
  CHECK(std::count(types.begin(), types.end(), "response.output_item.done") == 3);
  CHECK(reasoning == "Hmm.");
  CHECK(text == "Sure. ");
  CHECK(arguments == R"({"x": 1})");
  const auto stored = s.stored();
  REQUIRE(stored);
  const auto& answer = stored->first;
  CHECK(answer.reasoning_content == "Hmm.");
  CHECK(answer.content == "Sure. ");
  CHECK(answer.tool_calls_json.find(R"("arguments":{"x": 1})") != std::string::npos);

  // The final response: items in order, usage, status.
  const auto r = json(final_response);
  CHECK(r["id"].get_string().value() == head.id);
  CHECK(r["status"].get_string().value() == "completed");
  CHECK(r["usage"]["input_tokens"].get_int64().value() == 7);
  CHECK(r["usage"]["output_tokens"].get_int64().value() == 4);
  const auto out = r["output"].get_array().value();
  REQUIRE(out.size() == 3);
  CHECK(out.at(0)["type"].get_string().value() == "reasoning");
  CHECK(out.at(0)["content"].at(0)["text"].get_string().value() == "Hmm.");
  CHECK(out.at(1)["type"].get_string().value() == "message");
  CHECK(out.at(1)["content"].at(0)["text"].get_string().value() == "Sure. ");
  CHECK(out.at(2)["type"].get_string().value() == "function_call");
  CHECK(out.at(2)["arguments"].get_string().value() == R"({"x": 1})");
  CHECK(out.at(2)["call_id"].get_string().value().starts_with("call_"));

  // Whole: the same response object; at the length limit, incomplete.
  body.stream = false;
  stream_writer w(responses, body, head, "hermes");
  w.start_reasoning(false);
  w.set_prompt_tokens(7);
  std::string ignored;
  for (const auto& p : pieces) {
    w.count_token();
    w.add_text(ignored, p, {});
  }
  CHECK(w.opening().empty());
  CHECK(std::string(simdjson::minify(json(w.whole("stop")))) == final_response);
  stream_writer cut(responses, body, head, "");
  cut.count_token();
  cut.add_text(ignored, "Hel", {});
  const auto incomplete = json(cut.whole("length"));
  CHECK(incomplete["status"].get_string().value() == "incomplete");
  CHECK(incomplete["incomplete_details"]["reason"].get_string().value() == "max_output_tokens");
  CHECK(incomplete["output"].at(0)["status"].get_string().value() == "incomplete");
}

TEST_CASE("n choices: each chunk carries its choice's index, one tail ends the stream; whole ones combine") {
  auto body = request(api::endpoint::chat, true, true);
  body.n = 2;
  std::vector<stream_writer> ws;
  for (std::int32_t i = 0; i < 2; ++i) {
    auto h = k_head;
    h.index = i;
    ws.push_back(writer(body, "", h));
    ws.back().set_prompt_tokens(5);
  }
  std::string out = ws[0].opening() + ws[1].opening();
  ws[1].count_token();
  ws[1].add_text(out, "b", {});
  ws[0].count_token();
  ws[0].add_text(out, "a", {});
  out = ws[0].closing(std::move(out), "stop", false);
  out = ws[1].closing(std::move(out), "length", false);
  out += ws[0].tail({5, 2});
  std::vector<std::int64_t> indexes;
  std::string finishes;
  int usage = 0, done = 0;
  for (const auto& e : sse_events(out)) {
    if (e == "[DONE]") {
      ++done;
      continue;
    }
    const auto j = json(e);
    simdjson::dom::array choices = j["choices"].get_array().value();
    if (choices.size() == 0) {
      ++usage;
      CHECK(j["usage"]["prompt_tokens"].get_int64().value() == 5);
      CHECK(j["usage"]["completion_tokens"].get_int64().value() == 2);
      continue;
    }
    const auto c = choices.at(0);
    indexes.push_back(c["index"].get_int64().value());
    std::string_view f;
    if (c["finish_reason"].get(f) == simdjson::SUCCESS) finishes += std::to_string(indexes.back()) + std::string(f);
  }
  CHECK(indexes == std::vector<std::int64_t>{0, 1, 1, 0, 0, 1});
  CHECK(finishes == "0stop1length");
  CHECK(usage == 1);
  CHECK(done == 1);
  CHECK(out.ends_with("data: [DONE]\n\n"));

  // Whole: each choice's response, combined under the first's head.
  body.stream = false;
  std::vector<std::string> wholes;
  for (std::int32_t i = 0; i < 3; ++i) {
    auto h = k_head;
    auto w = writer(body, "", h);
    w.set_index(i);
    w.set_prompt_tokens(5);
    std::string ignored;
    w.count_token();
    w.add_text(ignored, std::string(1, static_cast<char>('x' + i)), {});
    wholes.push_back(w.whole("stop"));
  }
  const auto combined = api::combine_choices(wholes, {5, 3});
  const auto j = json(combined);
  CHECK(j["id"].get_string().value() == k_head.id);
  const auto choices = j["choices"].get_array().value();
  REQUIRE(choices.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(choices.at(i)["index"].get_int64().value() == static_cast<std::int64_t>(i));
    CHECK(choices.at(i)["message"]["content"].get_string().value() == std::string(1, static_cast<char>('x' + i)));
  }
  CHECK(j["usage"]["completion_tokens"].get_int64().value() == 3);
  CHECK(j["usage"]["total_tokens"].get_int64().value() == 8);
}
