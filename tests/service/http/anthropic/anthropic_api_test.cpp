// The Messages API fields agent clients send (Claude Code's first request):
// thinking adaptive and omitted, output_config, context_management, system
// messages in place, thinking signatures kept sealed, count_tokens' body.

#include "service/http/anthropic/anthropic_api.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace troupe;
using namespace troupe::api;

namespace {

auto parse(const std::string& extra, const std::string& messages = R"([{"role":"user","content":"hi"}])",
           bool counting = false, anthropic::message_options* options = nullptr) {
  return anthropic::parse_request(R"({"model":"m",)" + std::string(counting ? "" : R"("max_tokens":32000,)") +
                                      R"("messages":)" + messages + (extra.empty() ? "" : "," + extra) + "}",
                                  {}, options, counting);
}

auto ok(std::variant<generation_request, api_error> r) -> generation_request {
  if (const auto* e = std::get_if<api_error>(&r)) FAIL(e->message);
  return std::get<generation_request>(std::move(r));
}

auto error_of(const std::variant<generation_request, api_error>& r) -> std::string {
  const auto* e = std::get_if<api_error>(&r);
  return e ? e->message : "";
}

} // namespace

TEST_CASE("thinking adaptive: output_config.effort sets the budget; display omitted") {
  anthropic::message_options options;
  const auto high = ok(parse(R"("thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"})",
                             R"([{"role":"user","content":"hi"}])", false, &options));
  CHECK(high.sampling.thinking_budget == 8192);
  CHECK(options.omit_thinking);
  CHECK(ok(parse(R"("thinking":{"type":"adaptive"},"output_config":{"effort":"low"})")).sampling.thinking_budget == 1024);
  CHECK(ok(parse(R"("thinking":{"type":"adaptive"},"output_config":{"effort":"max"})")).sampling.thinking_budget < 0);
  CHECK(ok(parse(R"("thinking":{"type":"adaptive"})")).sampling.thinking_budget < 0);
  CHECK(ok(parse(R"("thinking":{"type":"enabled","budget_tokens":500},"output_config":{"effort":"high"})"))
            .sampling.thinking_budget == 500);
  CHECK(ok(parse(R"("thinking":{"type":"disabled"})")).template_kwargs_json == R"({"enable_thinking":false})");
  CHECK(error_of(parse(R"("thinking":{"type":"sometimes"})")).find("adaptive") != std::string::npos);
  CHECK(error_of(parse(R"("thinking":{"type":"adaptive","display":"loud"})")).find("thinking.display") != std::string::npos);
  CHECK(error_of(parse(R"("output_config":{"effort":"huge"})")).find("output_config.effort") != std::string::npos);
}

TEST_CASE("a message's output_config.effort (Claude Code's mid-conversation change) is the latest effort") {
  const auto r = ok(parse(R"("thinking":{"type":"adaptive"},"output_config":{"effort":"high"})",
                          R"([{"role":"user","content":"hi"},{"role":"system","content":"env","output_config":{"effort":"low"}}])"));
  CHECK(r.sampling.thinking_budget == 1024);
  CHECK(error_of(parse("", R"([{"role":"user","content":"hi","output_config":{"format":{}}}])"))
            .find("messages[0].output_config.format") != std::string::npos);
}

TEST_CASE("output_config.format: a JSON Schema through the grammar") {
  const auto r = ok(parse(R"("output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}})"));
  CHECK_FALSE(r.sampling.grammar.empty());
  CHECK(error_of(parse(R"("output_config":{"format":{"type":"json_schema"}})")).find("schema is missing") != std::string::npos);
  CHECK(error_of(parse(R"("output_config":{"format":{"type":"json_schema","schema":{"oneOf":[]}}})")).find("oneOf") !=
        std::string::npos);
}

TEST_CASE("context_management: the edits, in order, with their defaults") {
  const auto r = ok(parse(
      R"("context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":5000},"keep":{"type":"tool_uses","value":2},"exclude_tools":["Bash"],"clear_tool_inputs":true},{"type":"clear_thinking_20251015","keep":"all"}]})"));
  const auto& e = r.edits;
  CHECK(e.clear_tool_uses);
  CHECK(e.trigger_tokens == 5000);
  CHECK(e.keep_tool_uses == 2);
  CHECK(e.exclude_tools == std::vector<std::string>{"Bash"});
  CHECK(e.clear_tool_inputs);
  CHECK(e.clear_thinking);
  CHECK(e.keep_thinking_turns == -1);
  CHECK_FALSE(e.thinking_first);
  const auto d = ok(parse(R"("context_management":{"edits":[{"type":"clear_thinking_20251015"}]})")).edits;
  CHECK(d.clear_thinking);
  CHECK(d.keep_thinking_turns == 1);
  CHECK_FALSE(d.clear_tool_uses);
  CHECK(error_of(parse(R"("context_management":{"edits":[{"type":"compact_2026"}]})")).find("clear_thinking_20251015") !=
        std::string::npos);
  CHECK(error_of(parse(R"("context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"some"}]})"))
            .find("keep") != std::string::npos);
}

TEST_CASE("a system message in messages stays in place; thinking signatures are kept sealed") {
  const auto r = ok(parse("", R"([{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"env"}]},)"
                               R"({"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"trp1.abc"},{"type":"text","text":"ok"}]},)"
                               R"({"role":"user","content":"more"}])"));
  REQUIRE(r.messages.size() == 4);
  CHECK(r.messages[1].role == "system");
  CHECK(r.messages[1].content == "env");
  CHECK(r.messages[2].reasoning_content.empty());
  CHECK(r.messages[2].reasoning_sealed == "trp1.abc");
  const auto shown = ok(parse("", R"([{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"why","signature":"trp1.abc"}]}])"));
  CHECK(shown.messages[1].reasoning_content == "why");
  CHECK(shown.messages[1].reasoning_sealed.empty());
  CHECK(error_of(parse("", R"([{"role":"system","content":[{"type":"tool_result","tool_use_id":"x","content":"r"}]}])"))
            .find("text blocks only") != std::string::npos);
}

TEST_CASE("count_tokens' body needs no max_tokens; a message's does") {
  CHECK(std::holds_alternative<generation_request>(parse("", R"([{"role":"user","content":"hi"}])", true)));
  CHECK(anthropic::parse_request(R"({"messages":[{"role":"user","content":"hi"}]})", {}).index() == 1);
}

TEST_CASE("usage: input_tokens is what was neither read from the cache nor written to it") {
  CHECK(anthropic::usage_json({100, 7, 64, 32}, true) ==
        R"({"input_tokens":4,"cache_creation_input_tokens":32,"cache_read_input_tokens":64,"output_tokens":7})");
  CHECK(anthropic::usage_json({10, 0, 0, 0}, false) ==
        R"({"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0})");
}
