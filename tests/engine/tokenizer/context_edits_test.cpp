// Anthropic's context edits on a conversation: which thinking and which tool
// results go, by the rules its documentation gives (keep the last N;
// exclude_tools; clear_tool_inputs).

#include "engine/tokenizer/context_edits.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace troupe;

namespace {

auto assistant(std::string reasoning, std::string calls = "") -> chat_message {
  chat_message m{"assistant", "text"};
  m.reasoning_content = std::move(reasoning);
  m.tool_calls_json = std::move(calls);
  return m;
}

auto result(std::string id, std::string content) -> chat_message {
  chat_message m{"tool", std::move(content)};
  m.tool_call_id = std::move(id);
  return m;
}

auto call(const std::string& id, const std::string& name) -> std::string {
  return R"([{"id":")" + id + R"(","type":"function","function":{"name":")" + name + R"(","arguments":{"a":1}}}])";
}

} // namespace

TEST_CASE("clear_thinking keeps the last N turns' thinking") {
  std::vector<chat_message> m = {{"user", "q"}, assistant("t1"), {"user", "q"}, assistant(""), {"user", "q"},
                                 assistant("t3"), {"user", "q"}, assistant("t4")};
  auto one = m;
  CHECK(clear_thinking(one, 1) == 2);
  CHECK(one[1].reasoning_content.empty());
  CHECK(one[5].reasoning_content.empty());
  CHECK(one[7].reasoning_content == "t4");
  auto all = m;
  CHECK(clear_thinking(all, -1) == 0);
  CHECK(all == m);
  auto two = m;
  CHECK(clear_thinking(two, 2) == 1);
  CHECK(two[5].reasoning_content == "t3");
}

TEST_CASE("clear_tool_uses keeps the last N results, spares exclude_tools, empties inputs when asked") {
  std::vector<chat_message> m = {{"user", "q"},
                                 assistant("", call("a", "read")), result("a", "A"),
                                 assistant("", call("b", "bash")), result("b", "B"),
                                 assistant("", call("c", "read")), result("c", "C"),
                                 assistant("", call("d", "read")), result("d", "D")};
  context_edits e;
  e.clear_tool_uses = true;
  e.keep_tool_uses = 1;
  auto plain = m;
  CHECK(clear_tool_uses(plain, e) == 3);
  CHECK(plain[2].content == cleared_tool_result);
  CHECK(plain[4].content == cleared_tool_result);
  CHECK(plain[6].content == cleared_tool_result);
  CHECK(plain[8].content == "D");
  CHECK(plain[1].tool_calls_json == m[1].tool_calls_json);
  e.exclude_tools = {"bash"};
  e.clear_tool_inputs = true;
  auto spared = m;
  CHECK(clear_tool_uses(spared, e) == 2);
  CHECK(spared[4].content == "B");
  CHECK(spared[1].tool_calls_json.find(R"("arguments":{})") != std::string::npos);
  CHECK(spared[3].tool_calls_json == m[3].tool_calls_json);
  CHECK(spared[7].tool_calls_json == m[7].tool_calls_json); // (its result is kept)
  e.keep_tool_uses = 5;
  auto few = m;
  CHECK(clear_tool_uses(few, e) == 0);
  CHECK(few == m);
}
