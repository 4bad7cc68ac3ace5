// What a backend and model refuse of a request, and what they prepare.

#include "service/request/admission.hpp"

#include <doctest/doctest.h>

using namespace troupe;
using namespace troupe::api;

namespace {

/// A chat request; `implied_by`: the field of a protocol's own that implied its thinking budget.
auto a_chat(std::string implied_by = {}) -> generation_request {
  generation_request r;
  r.kind = endpoint::chat;
  if (!implied_by.empty()) {
    r.thinking_param = std::move(implied_by);
    r.thinking_implied = true;
  }
  r.messages.push_back({"user", "hi"});
  r.choice.what = tool_choice::mode::none;
  return r;
}

const request_support cpu_thinker{true, true, true, "hermes"};
const request_support cuda_plain{false, false, false, ""};

} // namespace

TEST_CASE("check_before_encoding: what the backend cannot do is a 400 naming the field") {
  auto r = a_chat();
  r.kind = endpoint::completions;
  r.echo = r.want_logprobs = true;
  CHECK(!check_before_encoding(r, cpu_thinker));
  CHECK(check_before_encoding(r, cuda_plain)->param == "echo");
  r = a_chat();
  r.sampling.grammar = "root ::= \"a\"";
  CHECK(!check_before_encoding(r, cpu_thinker));
  const auto e = check_before_encoding(r, cuda_plain);
  REQUIRE(e);
  CHECK(e->status == 400);
  CHECK(e->param == "response_format");
  CHECK(e->code == "unsupported_parameter");
}

TEST_CASE("check_before_encoding: a thinking budget asked for by name is refused where it cannot act; implied, it is dropped") {
  auto r = a_chat();
  r.sampling.thinking_budget = 8;
  CHECK(!check_before_encoding(r, cpu_thinker));
  CHECK(r.sampling.thinking_budget == 8);
  const request_support cpu_plain{true, true, false, ""};
  CHECK(check_before_encoding(r, cpu_plain)->param == "thinking_token_budget");
  const request_support cuda_thinker{false, false, true, ""};
  CHECK(check_before_encoding(r, cuda_thinker)->code == "unsupported_parameter");
  for (const std::string param : {"thinking.budget_tokens", "reasoning.effort"}) {
    auto implied = a_chat(param);
    implied.sampling.thinking_budget = 1024;
    CHECK(!check_before_encoding(implied, cpu_plain));
    CHECK(implied.sampling.thinking_budget == -1);
    implied.sampling.thinking_budget = 1024;
    CHECK(check_before_encoding(implied, cuda_thinker)->param == param);
  }
}

TEST_CASE("check_before_encoding: tools need a tool-call format; a required call becomes a grammar") {
  auto r = a_chat();
  r.tools.push_back({"get_weather", R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"});
  r.choice.what = tool_choice::mode::automatic;
  CHECK(check_before_encoding(r, cuda_plain)->param == "tools");
  CHECK(!check_before_encoding(r, cpu_thinker));
  CHECK(r.sampling.grammar.empty()); // auto: the model may answer in text
  r.choice.what = tool_choice::mode::required;
  CHECK(!check_before_encoding(r, cpu_thinker));
  CHECK(r.sampling.grammar.find("get_weather") != std::string::npos);
  CHECK(check_before_encoding(r, cpu_thinker)->param == "tool_choice"); // a grammar is there now: as if response_format were given
}
