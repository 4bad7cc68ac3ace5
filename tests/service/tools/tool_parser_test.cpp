// The tool-call parsers (service/tools/tool_parser) on each family's
// documented output: whole, and streamed cut at every byte, where a call's
// id and name must come before its argument fragments (as OpenAI streams).

#include "service/tools/tool_parser.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace troupe::tools;

namespace {

struct parsed {
  std::string content;
  std::vector<tool_call> calls;
  friend auto operator==(const parsed&, const parsed&) -> bool = default;
};

auto ids() -> id_source {
  return [n = 0]() mutable { return "call_" + std::to_string(n++); };
}

/// `text` fed in pieces of `piece` bytes (0: whole), then finished; also
/// checks the deltas' order: a call's first delta names it.
auto parse(const std::string& family, const std::string& text, std::size_t piece = 0) -> parsed {
  auto p = make_tool_parser(family, ids());
  REQUIRE(p != nullptr);
  parsed out;
  std::vector<bool> named;
  const auto take = [&](const parse_delta& d) {
    for (const auto& c : d.calls) {
      if (c.index >= named.size()) named.resize(c.index + 1, false);
      if (!named[c.index]) {
        CHECK_MESSAGE(!c.name.empty(), "a call's first delta carries its name");
        CHECK(!c.id.empty());
        named[c.index] = true;
      } else {
        CHECK_MESSAGE(c.name.empty(), "a call is named once");
      }
    }
    merge(d, out.content, out.calls);
  };
  if (piece == 0) {
    take(p->feed(text));
  } else {
    for (std::size_t at = 0; at < text.size(); at += piece) take(p->feed(text.substr(at, piece)));
  }
  take(p->finish());
  return out;
}

/// Whole, and cut at every byte and every 3 bytes: the same result.
auto parse_all_ways(const std::string& family, const std::string& text) -> parsed {
  const auto whole = parse(family, text);
  CHECK(parse(family, text, 1) == whole);
  CHECK(parse(family, text, 3) == whole);
  return whole;
}

} // namespace

TEST_CASE("hermes (Qwen2.5/3, Hermes): <tool_call> blocks, content before them, parallel calls") {
  const auto one = parse_all_ways("hermes", "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                            "{\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>");
  CHECK(one.content == "Let me check.\n");
  REQUIRE(one.calls.size() == 1);
  CHECK(one.calls[0] == tool_call{"call_0", "get_weather", R"({"city": "Paris", "unit": "celsius"})"});
  const auto two = parse_all_ways("hermes", "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}\n"
                                            "</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"b\"}\n</tool_call>");
  CHECK(two.content.empty());
  REQUIRE(two.calls.size() == 2);
  CHECK(two.calls[0] == tool_call{"call_0", "a", R"({"x": [1, {"y": "}"}]})"});
  CHECK(two.calls[1] == tool_call{"call_1", "b", "{}"}); // arguments before the name: held, then given
  // No call: the text as it is, even with a '<' that might have opened one.
  const auto plain = parse_all_ways("hermes", "1 < 2 and <tool> is not <tool_call");
  CHECK(plain.content == "1 < 2 and <tool> is not <tool_call");
  CHECK(plain.calls.empty());
}

TEST_CASE("llama3_json (Llama 3.1-3.3): a JSON call opening the answer, <|python_tag|>, several with ';'") {
  const auto one = parse_all_ways("llama3_json",
                                  "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"San Francisco, CA\"}}");
  CHECK(one.content.empty());
  REQUIRE(one.calls.size() == 1);
  CHECK(one.calls[0] == tool_call{"call_0", "get_weather", R"({"city": "San Francisco, CA"})"});
  const auto tagged = parse_all_ways("llama3_json", "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"n\": 1}}; "
                                                    "{\"name\": \"b\", \"parameters\": {\"s\": \"x;y\"}}");
  REQUIRE(tagged.calls.size() == 2);
  CHECK(tagged.calls[0] == tool_call{"call_0", "a", R"({"n": 1})"});
  CHECK(tagged.calls[1] == tool_call{"call_1", "b", R"({"s": "x;y"})"});
  // An answer that does not open with a call is content, braces and all.
  const auto plain = parse_all_ways("llama3_json", "The JSON is {\"name\": \"x\"}.");
  CHECK(plain.content == "The JSON is {\"name\": \"x\"}.");
  CHECK(plain.calls.empty());
}

TEST_CASE("mistral: [TOOL_CALLS] then a JSON array of calls; arguments given as a JSON string") {
  const auto two = parse_all_ways("mistral", "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, "
                                             "{\"name\": \"now\", \"arguments\": {}}]");
  CHECK(two.content.empty());
  REQUIRE(two.calls.size() == 2);
  CHECK(two.calls[0] == tool_call{"call_0", "add", R"({"a": 1, "b": 2})"});
  CHECK(two.calls[1] == tool_call{"call_1", "now", "{}"});
  const auto string_args =
      parse_all_ways("mistral", "Sure. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": \\\"\\u00e9\\\"}\"}]");
  CHECK(string_args.content == "Sure. ");
  REQUIRE(string_args.calls.size() == 1);
  CHECK(string_args.calls[0].arguments == "{\"q\": \"\xc3\xa9\"}");
  const auto plain = parse_all_ways("mistral", "No tools [TOOL_ today.");
  CHECK(plain.content == "No tools [TOOL_ today.");
}

TEST_CASE("a call cut off by max_tokens is given as far as it went; unknown families are refused") {
  const auto cut = parse("hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa");
  REQUIRE(cut.calls.size() == 1);
  CHECK(cut.calls[0].name == "get_weather");
  CHECK(cut.calls[0].arguments == "{\"city\": \"Pa");
  CHECK(make_tool_parser("pythonic", ids()) == nullptr);
  CHECK(tool_parser_names() == std::vector<std::string>{"hermes", "llama3_json", "mistral", "harmony"});
}
