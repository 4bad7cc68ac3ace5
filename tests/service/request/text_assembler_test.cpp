// A choice's text as neutral events: its tokens detokenized, a stop
// string cut and each token's logprob paired with its bytes; plain text one
// event per token, the reasoning split out, tool calls as a start and
// argument fragments, what the parsers held given up at the end, and the
// same call ids on a retry.

#include "service/request/text_assembler.hpp"

#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace troupe;

namespace {

/// The events, in their groups.
struct recorder {
  std::vector<std::vector<output_event>> groups;
  auto emit() -> text_assembler::emit {
    return [this](std::span<const output_event> events) { groups.emplace_back(events.begin(), events.end()); };
  }
  auto all(output_event::kind k) const -> std::string {
    std::string out;
    for (const auto& g : groups)
      for (const auto& e : g)
        if (e.what == k) out += e.text;
    return out;
  }
};

const std::vector<std::string> k_pieces = {"<thi", "nk>Let me", " call it.</thi",
                                           "nk>\n\nOK <tool_call>\n{\"name\": \"f\", ",
                                           "\"arguments\": {\"x\": 1}}\n</tool_call>"};

} // namespace

TEST_CASE("plain text: one text event per token, with its logprobs; nothing held at the end") {
  text_assembler a("", "cmpl-1");
  recorder r;
  api::token_logprob lp;
  lp.token = "Hi";
  lp.logprob = -0.5f;
  a.feed("Hi", {lp}, r.emit());
  a.feed("", {}, r.emit()); // (a token whose bytes are not settled yet)
  REQUIRE(r.groups.size() == 2);
  CHECK(r.groups[0].at(0).what == output_event::kind::text);
  CHECK(r.groups[0][0].text == "Hi");
  CHECK(r.groups[0][0].logprobs.at(0).logprob == -0.5f);
  CHECK(r.groups[1].at(0).text.empty());
  a.finish(r.emit());
  CHECK(r.groups.size() == 2);
  CHECK(!a.parsed());
  CHECK(a.final_reason("stop") == "stop");
}

TEST_CASE("reasoning and a tool call: the <think> block as reasoning, the call as its start and arguments") {
  text_assembler a("hermes", "chatcmpl-9");
  a.start_reasoning(false);
  recorder r;
  for (const auto& p : k_pieces) a.feed(p, {}, r.emit());
  a.finish(r.emit());
  CHECK(a.parsed());
  CHECK(r.all(output_event::kind::reasoning) == "Let me call it.");
  CHECK(r.all(output_event::kind::text) == "\n\nOK ");
  std::vector<output_event> calls;
  for (const auto& g : r.groups)
    for (const auto& e : g)
      if (e.what == output_event::kind::call_start || e.what == output_event::kind::call_arguments) calls.push_back(e);
  REQUIRE(!calls.empty());
  CHECK(calls[0].what == output_event::kind::call_start); // the id and the name come first
  CHECK(calls[0].name == "f");
  CHECK(calls[0].call_id.starts_with("call_"));
  CHECK(calls[0].call_id.size() == 29);
  std::string arguments;
  for (const auto& c : calls) {
    CHECK(c.call == 0);
    arguments += c.text;
  }
  CHECK(arguments == R"({"x": 1})");
  CHECK(a.final_reason("stop") == "tool_calls");
  CHECK(a.final_reason("length") == "length");
  // The group's events are the tool parser's deltas again, one each.
  const auto deltas = call_deltas(calls);
  CHECK(deltas.size() == calls.size());
  CHECK(deltas[0].id == calls[0].call_id);

  // A retry: no calls made, and the same ids again (a function of the response's id).
  a.restart();
  CHECK(a.final_reason("stop") == "stop");
  recorder again;
  for (const auto& p : k_pieces) a.feed(p, {}, again.emit());
  a.finish(again.emit());
  std::string id;
  for (const auto& g : again.groups)
    for (const auto& e : g)
      if (e.what == output_event::kind::call_start) id = e.call_id;
  CHECK(id == calls[0].call_id);
}

TEST_CASE("what the parsers hold comes out at the end") {
  text_assembler a("", "chatcmpl-2");
  a.start_reasoning(true); // (the prompt opened the block)
  recorder r;
  a.feed("still thinking", {}, r.emit());
  a.finish(r.emit());
  CHECK(r.all(output_event::kind::reasoning) == "still thinking");
  CHECK(r.all(output_event::kind::text).empty());
}

TEST_CASE("tokens: detokenized, cut at a stop string, each logprob paired with its token's bytes") {
  const auto& tok = testing::test_tokenizer();
  const auto ids = tok.encode("Permission is hereby granted", false);
  REQUIRE(ids.size() >= 3);
  sampling_params sp;
  sp.stop = {" hereby"};
  text_assembler a("", "cmpl-3");
  a.start_tokens(true, tok, sp, std::vector<token_id>{}, true);
  recorder r;
  output_delta last;
  for (std::size_t i = 0; i < ids.size() && last.finished == finish_reason::none; ++i) {
    api::token_logprob lp;
    lp.logprob = -static_cast<float>(i);
    last = a.feed_token(ids[i], lp, r.emit());
  }
  CHECK(last.finished == finish_reason::stop);
  CHECK(last.stop_reason == " hereby");
  CHECK(r.all(output_event::kind::text) == "Permission is");
  // Every settled token's logprob, in order, its bytes as its token.
  std::string bytes;
  float expected = 0;
  for (const auto& g : r.groups)
    for (const auto& e : g)
      for (const auto& lp : e.logprobs) {
        CHECK(lp.logprob == expected);
        expected -= 1;
        bytes += lp.token;
      }
  CHECK(bytes.starts_with("Permission is"));
  // A retry forgets the detokenizer until it is started again.
  a.restart();
  a.start_tokens(false, tok, sampling_params{}, std::vector<token_id>{}, true);
  recorder again;
  for (const auto id : ids) (void)a.feed_token(id, std::nullopt, again.emit());
  CHECK(again.all(output_event::kind::text).starts_with("Permission is hereby"));
}
