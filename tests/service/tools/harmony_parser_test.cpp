// gpt-oss's harmony output (service/tools/harmony_parser): channels into
// reasoning, content and tool calls, whole and streamed cut at every byte,
// with both places a recipient may sit, preambles, several calls, text with
// no header, and output cut off mid-message.

#include "service/tools/harmony_parser.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace troupe::tools;

namespace {

struct parsed {
  std::string reasoning, content;
  std::vector<tool_call> calls;
  friend auto operator==(const parsed&, const parsed&) -> bool = default;
};

/// `text` fed in pieces of `piece` bytes (0: whole), then finished.
auto parse(const std::string& text, std::size_t piece = 0) -> parsed {
  harmony_parser p([n = 0]() mutable { return "call_" + std::to_string(n++); });
  parsed out;
  const auto take = [&](const parse_delta& d) {
    out.reasoning += d.reasoning;
    for (const auto& c : d.calls)
      if (c.index >= out.calls.size()) CHECK_MESSAGE(!c.name.empty(), "a call's first delta names it");
    merge(d, out.content, out.calls);
  };
  if (piece == 0) {
    take(p.feed(text));
  } else {
    for (std::size_t at = 0; at < text.size(); at += piece) take(p.feed(text.substr(at, piece)));
  }
  take(p.finish());
  return out;
}

auto parse_all_ways(const std::string& text) -> parsed {
  const auto whole = parse(text);
  CHECK(parse(text, 1) == whole);
  CHECK(parse(text, 5) == whole);
  return whole;
}

} // namespace

TEST_CASE("harmony: the analysis channel is reasoning, the final channel the answer") {
  // <|return|> ends generation, so the text stops before it.
  const auto r = parse_all_ways("<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|>"
                                "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.");
  CHECK(r.reasoning == "User asks 2+2. Answer 4.");
  CHECK(r.content == "2 + 2 = 4.");
  CHECK(r.calls.empty());
  // A final answer with no reasoning; a structured one (<|constrain|>).
  CHECK(parse_all_ways("<|channel|>final<|message|>Hi <there>!") == parsed{"", "Hi <there>!", {}});
  CHECK(parse_all_ways("<|channel|>final <|constrain|>json<|message|>{\"a\": 1}") == parsed{"", "{\"a\": 1}", {}});
}

TEST_CASE("harmony: a message to functions.NAME is a call, its body the arguments, either place of the recipient") {
  const auto channel = parse_all_ways("<|channel|>analysis<|message|>Need the weather.<|end|>"
                                      "<|start|>assistant<|channel|>commentary to=functions.get_weather "
                                      "<|constrain|>json<|message|>{\"city\": \"Paris\"}");
  CHECK(channel.reasoning == "Need the weather.");
  CHECK(channel.content.empty());
  REQUIRE(channel.calls.size() == 1);
  CHECK(channel.calls[0] == tool_call{"call_0", "get_weather", "{\"city\": \"Paris\"}"});
  const auto role = parse_all_ways(" to=functions.get_time<|channel|>commentary json<|message|>{}");
  REQUIRE(role.calls.size() == 1);
  CHECK(role.calls[0] == tool_call{"call_0", "get_time", "{}"});
}

TEST_CASE("harmony: a preamble is content; several calls in turn; <|call|> between them") {
  const auto r = parse_all_ways("<|channel|>commentary<|message|>Checking both.<|end|>"
                                "<|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json<|message|>"
                                "{\"x\": \"<|\"}<|call|><|start|>assistant<|channel|>commentary to=functions.b "
                                "<|constrain|>json<|message|>{\"y\": 2}");
  CHECK(r.content == "Checking both.");
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0] == tool_call{"call_0", "a", "{\"x\": \"<|\"}"});
  CHECK(r.calls[1] == tool_call{"call_1", "b", "{\"y\": 2}"});
}

TEST_CASE("harmony: text with no header is content; a cut-off message keeps what came") {
  CHECK(parse_all_ways("Hello, world.") == parsed{"", "Hello, world.", {}});
  // Text before a header: all of it content, however it is cut.
  CHECK(parse_all_ways("Hello<|channel|>final<|message|>Hi") == parsed{"", "Hello<|channel|>final<|message|>Hi", {}});
  CHECK(parse_all_ways("tomorrow <|end|>") == parsed{"", "tomorrow <|end|>", {}});
  CHECK(parse_all_ways("<|channel|>analysis<|message|>thinking aloud <|e") == parsed{"thinking aloud <|e", "", {}});
  CHECK(parse_all_ways("<|channel|>analy") == parsed{"", "<|channel|>analy", {}});
  // A call with no arguments' text: "{}", which every client parses.
  const auto empty = parse_all_ways("<|channel|>commentary to=functions.now <|constrain|>json<|message|>");
  REQUIRE(empty.calls.size() == 1);
  CHECK(empty.calls[0] == tool_call{"call_0", "now", "{}"});
}
