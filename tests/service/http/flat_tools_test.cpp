// The flat tools of the Messages and Responses APIs, read through each API's
// own parse_request: kept as specs, written as chat's function tools for the
// template, and their mistakes refused with a 400 naming the field.

#include "service/http/anthropic/anthropic_api.hpp"
#include "service/http/responses/responses_api.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace troupe;
using namespace troupe::api;

namespace {

auto messages_with(const std::string& tools) {
  return anthropic::parse_request(
      R"({"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":)" + tools + "}", {});
}

/// The Responses API's own fields of the last request read.
responses::responses_fields responses_fields;

auto responses_with(const std::string& tools) {
  return responses::parse_request(R"({"model":"m","input":"hi","tools":)" + tools + "}", {}, responses_fields);
}

template <class Result>
auto refused(const Result& r, const std::string& param, const std::string& says) -> bool {
  const auto* e = std::get_if<api_error>(&r);
  if (!e) return false;
  INFO(e->message);
  return e->status == 400 && e->param == param && e->message.find(says) != std::string::npos;
}

const std::string schema = R"({"type":"object","properties":{"city":{"type":"string"}}})";

} // namespace

TEST_CASE("Messages tools: input_schema, type custom or absent, as chat's function tools") {
  const auto r = messages_with(R"([{"name":"weather","description":"Today's \"weather\"","input_schema":)" + schema +
                               R"(,"cache_control":{"type":"ephemeral"}},{"type":"custom","name":"time","input_schema":{}}])");
  const auto* req = std::get_if<generation_request>(&r);
  REQUIRE(req);
  REQUIRE(req->tools.size() == 2);
  CHECK(req->tools[0].name == "weather");
  CHECK(req->tools[0].parameters == schema);
  CHECK(req->tools[1].name == "time");
  CHECK(req->tools_json ==
        R"([{"type":"function","function":{"name":"weather","description":"Today's \"weather\"","parameters":)" +
            schema + R"(}},{"type":"function","function":{"name":"time","description":"","parameters":{}}}])");
}

TEST_CASE("Messages tools: what is refused names its field") {
  CHECK(refused(messages_with(R"({"name":"x"})"), "tools", "tools"));
  CHECK(refused(messages_with(R"([7])"), "tools[0]", "a tool"));
  CHECK(refused(responses_with(R"([{"type":"custom","name":"apply_patch"}])"), "tools[0].type",
                R"(tools[0].type "custom" is not supported; function tools are)"));
  CHECK(refused(messages_with(R"([{"input_schema":{}}])"), "tools[0].name", "tools[0].name is missing"));
  CHECK(refused(messages_with(R"([{"name":"x"}])"), "tools[0].input_schema", "tools[0].input_schema is missing"));
  CHECK(refused(messages_with(R"([{"name":"x","input_schema":[]}])"), "tools[0].input_schema", "input_schema"));
  CHECK(refused(messages_with(R"([{"name":"x","input_schema":{}},{"name":"x","input_schema":{}}])"), "tools[1].name",
                R"(two tools are named "x")"));
}

TEST_CASE("Responses tools: type function, parameters optional, the array kept as given") {
  const std::string given =
      R"([{"type":"function","name":"weather","parameters":)" + schema + R"(,"strict":true},{"type":"function","name":"now"}])";
  const auto r = responses_with(given);
  const auto* req = std::get_if<generation_request>(&r);
  REQUIRE(req);
  REQUIRE(req->tools.size() == 2);
  CHECK(req->tools[0].parameters == schema);
  CHECK(req->tools[1].parameters.empty());
  CHECK(responses_fields.tools_json == given);
  CHECK(req->tools_json ==
        R"([{"type":"function","function":{"name":"weather","description":"","parameters":)" + schema +
            R"(}},{"type":"function","function":{"name":"now","description":"","parameters":{"type":"object","properties":{}}}}])");
}

TEST_CASE("Responses tools: what is refused names its field") {
  CHECK(refused(responses_with(R"([{"name":"x"}])"), "tools[0].type", R"(tools[0].type "" is not supported)"));
  CHECK(refused(responses_with(R"([{"type":"namespace","tools":[{"type":"function","name":"f"}],"name":"ns"}])"),
                "tools[0].tools", "a namespace tool's name must come before its tools"));
  CHECK(refused(responses_with(R"([{"type":"namespace","name":"ns","tools":[{"type":"custom","name":"f"}]}])"),
                "tools[0].tools[0].type", "is not supported"));
  CHECK(refused(responses_with(R"([{"type":"function"}])"), "tools[0].name", "tools[0].name is missing"));
  CHECK(refused(responses_with(R"([{"type":"function","name":"x","parameters":"{}"}])"), "tools[0].parameters",
                "parameters"));
  CHECK(refused(responses_with(R"([{"type":"function","name":"x"},{"type":"function","name":"x"}])"), "tools[1].name",
                R"(two tools are named "x")"));
}

TEST_CASE("hosted tools cannot run here: skipped, named, not offered") {
  const auto m = messages_with(R"([{"type":"web_search_20250305","name":"web_search"},{"name":"x","input_schema":{}}])");
  const auto* mr = std::get_if<generation_request>(&m);
  REQUIRE(mr);
  CHECK(mr->skipped_tools == std::vector<std::string>{"web_search_20250305"});
  REQUIRE(mr->tools.size() == 1);
  CHECK(mr->tools_json.find("web_search") == std::string::npos);
  const auto r = responses_with(R"([{"type":"web_search","external_web_access":false},{"type":"file_search"}])");
  const auto* rr = std::get_if<generation_request>(&r);
  REQUIRE(rr);
  CHECK(rr->skipped_tools == std::vector<std::string>{"web_search", "file_search"});
  CHECK(rr->tools.empty());
}

TEST_CASE("Responses namespace tools: ns.f to the model, the namespace kept") {
  const auto r = responses_with(
      R"([{"type":"namespace","name":"agents","description":"d","tools":[{"type":"function","name":"spawn","parameters":)" +
      schema + R"(}]},{"type":"function","name":"exec"}])");
  const auto* req = std::get_if<generation_request>(&r);
  REQUIRE(req);
  REQUIRE(req->tools.size() == 2);
  CHECK(req->tools[0].name == "agents.spawn");
  CHECK(req->tools[1].name == "exec");
  CHECK(responses_fields.namespaces == std::vector<std::string>{"agents"});
  CHECK(req->tools_json.find(R"("name":"agents.spawn")") != std::string::npos);
  // A call of it sent back joins its namespace and name again.
  const auto back = responses::parse_request(
      R"({"input":[{"type":"function_call","call_id":"c1","namespace":"agents","name":"spawn","arguments":"{}"},)"
      R"({"type":"function_call_output","call_id":"c1","output":"ok"}]})", {});
  const auto* b = std::get_if<generation_request>(&back);
  REQUIRE(b);
  CHECK(b->messages[0].tool_calls_json.find(R"("name":"agents.spawn")") != std::string::npos);
}

TEST_CASE("Messages defer_loading: offered once a tool_reference names it, callable all along") {
  const std::string tools = R"([{"name":"search","input_schema":{}},{"name":"cron","input_schema":{},"defer_loading":true}])";
  const auto before = messages_with(tools);
  const auto* b = std::get_if<generation_request>(&before);
  REQUIRE(b);
  CHECK(b->tools.size() == 2);
  CHECK(b->tools_json.find("cron") == std::string::npos);
  CHECK(b->deferred_tools == std::vector<std::string>{"cron"});
  const auto after = anthropic::parse_request(
      R"({"max_tokens":8,"tools":)" + tools +
          R"(,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"search","input":{}}]},)"
          R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"tool_reference","tool_name":"cron"}]}]}]})",
      {});
  const auto* a = std::get_if<generation_request>(&after);
  REQUIRE(a);
  CHECK(a->tools_json.find(R"("name":"cron")") != std::string::npos);
}
