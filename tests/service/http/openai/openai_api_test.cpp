// Requests to the OpenAI API parsed into completion requests, or refused.

#include "service/http/request_keys.hpp"
#include "tests/service/http/openai/openai_api_test_util.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <cmath>
#include <limits>

using namespace troupe;
using namespace troupe::api;
using namespace troupe::testing;

TEST_CASE("every kind of bad request gets status 400 with the right param and code") {
  const std::string deep = R"({"prompt":"a","x":)" + std::string(100, '[') + std::string(100, ']') + "}";
  const std::vector<error_case> cases = {
      // Not JSON, not an object, or more than one value.
      {C, "", "", "invalid_json"},
      {C, "not json", "", "invalid_json"},
      {C, "[1,2]", "", "invalid_json"},
      {C, R"("prompt")", "", "invalid_json"},
      {C, R"({"prompt":"a"} x)", "", "invalid_json"},
      {C, R"({"prompt":"a"}{})", "", "invalid_json"},
      {C, R"({"prompt":"a",})", "", "invalid_json"},
      {C, R"({"prompt":"a")", "", "invalid_json"},
      // Broken values in fields nobody reads are still broken JSON.
      {C, R"({"prompt":"a","junk":[1,2,})", "", "invalid_json"},
      {C, R"({"prompt":"a","junk":tru})", "", "invalid_json"},
      {C, R"({"prompt":"a","junk":1.2.3})", "", "invalid_json"},
      {C, R"({"prompt":"a","junk":"\x"})", "", "invalid_json"},
      {C, "{\"prompt\":\"\xff\"}", "", "invalid_json"},
      {C, R"({"temperature":nul,"prompt":"a"})", "", "invalid_json"},
      {C, deep, "", "invalid_json"},
      // Input missing or malformed.
      {C, "{}", "prompt", "missing_field"},
      {C, R"({"prompt":null})", "prompt", "missing_field"},
      {C, R"({"messages":[{"role":"user","content":"hi"}]})", "prompt", "missing_field"},
      {C, R"({"prompt":5})", "prompt", "invalid_type"},
      {C, R"({"prompt":["a","b"]})", "prompt", "invalid_value"},
      {C, R"({"prompt":[]})", "prompt", "invalid_value"},
      {C, R"({"prompt":[[]]})", "prompt", "invalid_value"},
      {C, R"({"prompt":["a",1]})", "prompt", "invalid_type"},
      {C, R"({"prompt":[1,"a"]})", "prompt", "invalid_type"},
      {C, R"({"prompt":[1,-2]})", "prompt", "invalid_value"},
      {C, R"({"prompt":[1,2.5]})", "prompt", "invalid_type"},
      {C, R"({"prompt":[1,4294967296]})", "prompt", "invalid_value"},
      {C, R"({"prompt":[[1],[2]]})", "prompt", "invalid_value"},
      {H, "{}", "messages", "missing_field"},
      {H, R"({"prompt":"hi"})", "messages", "missing_field"},
      {H, R"({"messages":[]})", "messages", "invalid_value"},
      {H, R"({"messages":"hi"})", "messages", "invalid_type"},
      {H, R"({"messages":[5]})", "messages", "invalid_type"},
      {H, R"({"messages":[{"role":"robot","content":"x"}]})", "messages[0].role", "invalid_value"},
      {H, R"({"messages":[{"role":"tool","content":"x"}]})", "messages[0].tool_call_id", "missing_field"},
      {H, R"({"messages":[{"role":1,"content":"x"}]})", "messages[0].role", "invalid_type"},
      {H, R"({"messages":[{"role":"user","content":"a"},{"content":"x"}]})", "messages[1].role",
       "missing_field"},
      {H, R"({"messages":[{"role":"user"}]})", "messages[0].content", "missing_field"},
      {H, R"({"messages":[{"role":"user","content":null}]})", "messages[0].content", "missing_field"},
      {H, R"({"messages":[{"role":"user","content":5}]})", "messages[0].content", "invalid_type"},
      {H, R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]})",
       "messages[0].content", "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content",
       "missing_field"},
      {H, R"({"messages":[{"role":"user","content":["hi"]}]})", "messages[0].content", "invalid_type"},
      // Sampling fields: wrong type, then out of range.
      {C, R"({"prompt":"a","model":5})", "model", "invalid_type"},
      {C, R"({"prompt":"a","max_tokens":0})", "max_tokens", "invalid_value"},
      {C, R"({"prompt":"a","max_tokens":-1})", "max_tokens", "invalid_value"},
      {C, R"({"prompt":"a","max_tokens":1.5})", "max_tokens", "invalid_type"},
      {C, R"({"prompt":"a","max_tokens":"5"})", "max_tokens", "invalid_type"},
      {C, R"({"prompt":"a","max_tokens":1e20})", "max_tokens", "invalid_value"},
      {C, R"({"prompt":"a","max_tokens":18446744073709551615})", "max_tokens", "invalid_value"},
      {C, R"({"prompt":"a","max_tokens":2147483648})", "max_tokens", "invalid_value"},
      {C, R"({"prompt":"a","max_tokens":123456789012345678901234567890})", "max_tokens", "invalid_value"},
      {C, R"({"prompt":"a","max_tokens":01})", "", "invalid_json"},
      {C, R"({"prompt":"a","max_tokens":1.})", "", "invalid_json"},
      {C, R"({"prompt":"a","max_completion_tokens":0})", "max_completion_tokens", "invalid_value"},
      {C, R"({"prompt":"a","temperature":"hot"})", "temperature", "invalid_type"},
      {C, R"({"prompt":"a","temperature":true})", "temperature", "invalid_type"},
      {C, R"({"prompt":"a","temperature":-0.5})", "temperature", "invalid_value"},
      {C, R"({"prompt":"a","temperature":1e39})", "temperature", "invalid_value"},
      {C, R"({"prompt":"a","temperature":-1e400})", "temperature", "invalid_value"},
      {C, R"({"prompt":"a","top_p":1.5})", "top_p", "invalid_value"},
      {C, R"({"prompt":"a","top_p":0})", "top_p", "invalid_value"},
      {C, R"({"prompt":"a","top_k":-2})", "top_k", "invalid_value"},
      {C, R"({"prompt":"a","top_k":2.5})", "top_k", "invalid_type"},
      {C, R"({"prompt":"a","min_p":2})", "min_p", "invalid_value"},
      {C, R"({"prompt":"a","presence_penalty":3})", "presence_penalty", "invalid_value"},
      {C, R"({"prompt":"a","frequency_penalty":-2.5})", "frequency_penalty", "invalid_value"},
      {C, R"({"prompt":"a","repetition_penalty":0})", "repetition_penalty", "invalid_value"},
      {C, R"({"prompt":"a","seed":-1})", "seed", "invalid_value"},
      {C, R"({"prompt":"a","seed":1.5})", "seed", "invalid_type"},
      {C, R"({"prompt":"a","seed":"1"})", "seed", "invalid_type"},
      {C, R"({"prompt":"a","stop":""})", "stop", "invalid_value"},
      {C, R"({"prompt":"a","stop":["x",""]})", "stop", "invalid_value"},
      {C, R"({"prompt":"a","stop":[1]})", "stop", "invalid_type"},
      {C, R"({"prompt":"a","stop":5})", "stop", "invalid_type"},
      {C, R"({"prompt":"a","stop_token_ids":[-1]})", "stop_token_ids", "invalid_value"},
      {C, R"({"prompt":"a","stop_token_ids":[1.5]})", "stop_token_ids", "invalid_type"},
      {C, R"({"prompt":"a","stop_token_ids":"1"})", "stop_token_ids", "invalid_type"},
      {C, R"({"prompt":"a","ignore_eos":1})", "ignore_eos", "invalid_type"},
      {C, R"({"prompt":"a","ignore_eos":"true"})", "ignore_eos", "invalid_type"},
      {C, R"({"prompt":"a","logprobs":21})", "logprobs", "invalid_value"},
      {C, R"({"prompt":"a","logprobs":-1})", "logprobs", "invalid_value"},
      {C, R"({"prompt":"a","logprobs":true})", "logprobs", "invalid_type"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"logprobs":1})", "logprobs", "invalid_type"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":21})",
       "top_logprobs", "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"top_logprobs":3})", "top_logprobs",
       "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"logprobs":false,"top_logprobs":3})",
       "top_logprobs", "invalid_value"},
      {C, R"({"prompt":"a","n":129})", "n", "invalid_value"},
      {C, R"({"prompt":"a","n":0})", "n", "invalid_value"},
      {C, R"({"prompt":"a","n":"1"})", "n", "invalid_type"},
      {C, R"({"prompt":"a","user":5})", "user", "invalid_type"},
      {C, R"({"prompt":"a","priority":1.5})", "priority", "invalid_type"},
      {C, R"({"prompt":"a","priority":3000000000})", "priority", "invalid_value"},
      {C, R"({"prompt":"a","stream":"yes"})", "stream", "invalid_type"},
      {C, R"({"prompt":"a","stream_options":{"include_usage":true}})", "stream_options", "invalid_value"},
      {C, R"({"prompt":"a","stream":false,"stream_options":{"include_usage":true}})", "stream_options",
       "invalid_value"},
      {C, R"({"prompt":"a","stream":true,"stream_options":{"include_usage":1}})", "stream_options",
       "invalid_type"},
      {C, R"({"prompt":"a","stream":true,"stream_options":5})", "stream_options", "invalid_type"},
      // The other endpoint's fields, which shape an answer: refused, naming the field.
      {C, R"({"prompt":"a","frobnicate":nul})", "", "invalid_json"}, // (a field in nobody's table is still JSON)
      {C, R"({"prompt":"a","messages":[]})", "messages", "unknown_parameter"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"prompt":"x"})", "prompt", "unknown_parameter"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"echo":true})", "echo", "unknown_parameter"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"suffix":"x"})", "suffix", "unknown_parameter"},
      {C, R"({"prompt":"a","tools":[]})", "tools", "unknown_parameter"},
      {C, R"({"prompt":"a","n":3,"best_of":2})", "best_of", "invalid_value"},
      {C, R"({"prompt":"a","best_of":2,"stream":true})", "best_of", "invalid_value"},
      {C, R"({"prompt":"a","best_of":0})", "best_of", "invalid_value"},
      {C, R"({"prompt":"a","suffix":"end"})", "suffix", "unsupported_parameter"},
      {C, R"({"prompt":"a","echo":"yes"})", "echo", "invalid_type"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"response_format":{"type":"yaml"}})",
       "response_format", "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"guided_json":{"oneOf":[]}})", "guided_json", "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"guided_regex":"a","guided_choice":["a"]})", "guided_choice",
       "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"response_format":"text"})", "response_format",
       "invalid_type"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function"}]})", "tools[0].function.name",
       "missing_field"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"tool_choice":"auto"})", "tool_choice", "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})",
       "tool_choice", "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"functions":[]})", "functions", "unsupported_parameter"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"function_call":"none"})", "function_call",
       "unsupported_parameter"},
      {C, R"({"prompt":"a","logit_bias":[1]})", "logit_bias", "invalid_type"},
      {C, R"({"prompt":"a","logit_bias":{"x":1}})", "logit_bias", "invalid_value"},
      {C, R"({"prompt":"a","logit_bias":{"-1":1}})", "logit_bias", "invalid_value"},
      {C, R"({"prompt":"a","logit_bias":{"12":"high"}})", "logit_bias", "invalid_type"},
      {C, R"({"prompt":"a","logit_bias":{"12":101}})", "logit_bias", "invalid_value"},
      {H, R"({"messages":[{"role":"user","content":"a"}],"logit_bias":{"3":-100.5}})", "logit_bias",
       "invalid_value"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    const auto e = parse_error(c.kind, c.body);
    CHECK(e.status == 400);
    CHECK(e.type == "invalid_request_error");
    CHECK(e.param == c.param);
    CHECK(e.code == c.code);
    CHECK(!e.message.empty());
  }
}

TEST_CASE("error messages name the field and the problem") {
  CHECK(parse_error(C, R"({"prompt":"a","n":3,"best_of":2})").message == "best_of (2) must be at least n (3)");
  {
    const auto ws = api::parse_request(H, R"({"messages":[{"role":"user","content":"a"}],"n":2})", {}, true);
    REQUIRE(std::holds_alternative<api_error>(ws));
    CHECK(std::get<api_error>(ws).message == "n > 1 is not supported on the WebSocket");
  }
  CHECK(parse_error(C, R"({"prompt":"a","top_p":1.5})").message == "top_p must be in (0, 1], got 1.5");
  CHECK(parse_error(C, R"({"prompt":"a","max_tokens":0})").message == "max_tokens must be between 1 and 2147483647, got 0");
  CHECK(parse_error(C, R"({"prompt":"a","max_tokens":1.5})").message == "max_tokens must be an integer");
  CHECK(parse_error(C, R"({"prompt":"a","logprobs":21})").message == "logprobs must be between 0 and 20, got 21");
  CHECK(parse_error(C, R"({"prompt":"a","stop":["x",""]})").message == "stop[1] must not be empty");
  CHECK(parse_error(C, R"({"prompt":"a","stop_token_ids":[4,-1]})").message ==
        "stop_token_ids[1] must be between 0 and 2147483647, got -1");
  CHECK(parse_error(C, R"({"prompt":[3,-1]})").message == "prompt[1] must be between 0 and 2147483647, got -1");
  CHECK(parse_error(C, "{}").message == "prompt is missing");
  CHECK(parse_error(C, "[]").message == "request body must be a JSON object");
  CHECK(parse_error(C, R"({"prompt":"a"}{})").message == "request body has text after the JSON object");
  CHECK(parse_error(C, R"({"prompt":"a","max_tokens":1e400})").message == "max_tokens is out of range");
  CHECK(parse_error(H, R"({"messages":[{"role":"robot","content":"x"}]})").message ==
        R"(messages[0].role must be "system", "user", "assistant" or "tool", got "robot")");
  CHECK(parse_error(H, R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]})")
            .message == R"(messages[0].content[1].type must be "text", got "image_url" (only text content is supported))");
}

TEST_CASE("a value out of range is told the whole range it broke") {
  // Over the top end: a message saying only ">= 1" would contradict the value.
  const auto big = parse_error(C, R"({"prompt":"a","max_tokens":2147483648})");
  CHECK(big.param == "max_tokens");
  CHECK(big.code == "invalid_value");
  CHECK(big.message == "max_tokens must be between 1 and 2147483647, got 2147483648");
  CHECK(parse_error(C, R"({"prompt":"a","max_completion_tokens":9223372036854775807})").message ==
        "max_completion_tokens must be between 1 and 2147483647, got 9223372036854775807");
  CHECK(parse_error(C, R"({"prompt":"a","max_tokens":18446744073709551615})").message ==
        "max_tokens must be between 1 and 2147483647, got 18446744073709551615");
  CHECK(parse_error(C, R"({"prompt":"a","max_tokens":3e9})").message ==
        "max_tokens must be between 1 and 2147483647, got 3e+09");
  CHECK(parse_error(C, R"({"prompt":[4294967295]})").message ==
        "prompt[0] must be between 0 and 2147483647, got 4294967295");
  CHECK(parse_error(C, R"({"prompt":[[1,2147483648]]})").message ==
        "prompt[0][1] must be between 0 and 2147483647, got 2147483648");
  CHECK(parse_error(C, R"({"prompt":"a","stop_token_ids":[4294967295]})").message ==
        "stop_token_ids[0] must be between 0 and 2147483647, got 4294967295");
  CHECK(parse_error(C, R"({"prompt":"a","priority":2147483648})").message ==
        "priority must be between -2147483648 and 2147483647, got 2147483648");
  CHECK(parse_error(C, R"({"prompt":"a","seed":-1})").message ==
        "seed must be between 0 and 18446744073709551615, got -1");
  CHECK(parse_error(C, R"({"prompt":"a","seed":2e19})").message ==
        "seed must be between 0 and 18446744073709551615, got 2e+19");
}

TEST_CASE("a completions request maps every field") {
  const auto r = parse_ok(C, R"({
      "model": "tiny", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "top_k": 40, "min_p": 0.05, "seed": 42, "stop": ["\n", "END"], "stop_token_ids": [2, 3],
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
      "ignore_eos": true, "logprobs": 3, "n": 1, "user": "u1", "priority": -5, "stream": true,
      "stream_options": {"include_usage": true, "continuous_usage_stats": false},
      "echo": false, "best_of": 1, "logit_bias": {"50256": -100}, "suffix": null})");
  CHECK(r.kind == C);
  CHECK(r.model == "tiny");
  CHECK(r.prompt == "Hello");
  CHECK(r.prompt_tokens.empty());
  CHECK(r.messages.empty());
  CHECK(r.max_tokens == 7);
  CHECK(r.sampling.max_tokens == 7);
  CHECK(r.sampling.temperature == 0.5f);
  CHECK(r.sampling.top_p == 0.9f);
  CHECK(r.sampling.top_k == 40);
  CHECK(r.sampling.min_p == 0.05f);
  CHECK(r.sampling.seed == std::optional<std::uint64_t>(42));
  CHECK(r.sampling.stop == std::vector<std::string>{"\n", "END"});
  CHECK(r.sampling.stop_token_ids == std::vector<token_id>{2, 3});
  CHECK(r.sampling.presence_penalty == 0.5f);
  CHECK(r.sampling.frequency_penalty == -0.5f);
  CHECK(r.sampling.repetition_penalty == 1.1f);
  CHECK(r.sampling.ignore_eos);
  CHECK(r.sampling.logprobs == 3);
  CHECK(r.want_logprobs);
  CHECK(r.top_logprobs == 3);
  CHECK(r.user == "u1");
  CHECK(r.priority == -5);
  CHECK(r.stream);
  CHECK(r.include_usage);
}

TEST_CASE("absent and null fields keep the model's defaults") {
  sampling_params d;
  d.temperature = 0.7f;
  d.top_p = 0.8f;
  d.top_k = 20;
  d.max_tokens = 99;
  const auto r = parse_ok(C, R"({"prompt":"x","temperature":null,"max_tokens":null,"stop":null,"logprobs":null})", d);
  CHECK(r.sampling.temperature == 0.7f);
  CHECK(r.sampling.top_p == 0.8f);
  CHECK(r.sampling.top_k == 20);
  CHECK(r.sampling.max_tokens == 99);
  CHECK_FALSE(r.max_tokens.has_value());
  CHECK(r.sampling.stop.empty());
  CHECK(r.sampling.logprobs == -1);
  CHECK_FALSE(r.want_logprobs);
  CHECK_FALSE(r.stream);
  CHECK_FALSE(r.include_usage);
  CHECK(r.model.empty());
  CHECK(r.priority == 0);

  // A request's own value replaces the default.
  CHECK(parse_ok(C, R"({"prompt":"x","top_k":-1})", d).sampling.top_k == -1);
  CHECK(parse_ok(C, R"({"prompt":"x","temperature":0})", d).sampling.temperature == 0.0f);
}

TEST_CASE("numbers: integers where floats go, whole floats where integers go") {
  const auto r = parse_ok(C, R"({"prompt":"x","temperature":1,"top_p":1,"max_tokens":2.0,"seed":1e3,"top_k":5})");
  CHECK(r.sampling.temperature == 1.0f);
  CHECK(r.sampling.top_p == 1.0f);
  CHECK(r.max_tokens == 2);
  CHECK(r.sampling.seed == std::optional<std::uint64_t>(1000));
  CHECK(parse_ok(C, R"({"prompt":"x","seed":18446744073709551615})").sampling.seed ==
        std::optional<std::uint64_t>(std::numeric_limits<std::uint64_t>::max()));
}

TEST_CASE("max_completion_tokens beats max_tokens, in either order") {
  CHECK(parse_ok(C, R"({"prompt":"x","max_tokens":5,"max_completion_tokens":9})").max_tokens == 9);
  CHECK(parse_ok(C, R"({"max_completion_tokens":9,"prompt":"x","max_tokens":5})").max_tokens == 9);
  const auto r = parse_ok(H, R"({"messages":[{"role":"user","content":"a"}],"max_completion_tokens":12})");
  CHECK(r.max_tokens == 12);
  CHECK(r.sampling.max_tokens == 12);
}

TEST_CASE("prompts: one string, one string in an array, token ids, one token list in an array") {
  CHECK(parse_ok(C, R"({"prompt":["only one"]})").prompt == "only one");
  CHECK(parse_ok(C, R"({"prompt":""})").prompt == "");
  const auto ids = parse_ok(C, R"({"prompt":[1,2,3,2147483647]})");
  CHECK(ids.prompt.empty());
  CHECK(ids.prompt_tokens == std::vector<token_id>{1, 2, 3, 2147483647});
  CHECK(parse_ok(C, R"({"prompt":[[4,5]]})").prompt_tokens == std::vector<token_id>{4, 5});
  // Escaped keys and text; the last of a repeated key wins.
  CHECK(parse_ok(C, R"({"pro\u006dpt":"a\u00e9\n","st\u006fre":1})").prompt == "a\xc3\xa9\n");
  CHECK(parse_ok(C, R"({"prompt":"a","prompt_x":1})").unknown_fields == std::vector<std::string>{"prompt_x"});
  CHECK(parse_ok(C, R"({"prompt":"first","prompt":"second"})").prompt == "second");
  CHECK(parse_ok(C, " \n{\"prompt\":\"x\"}\n ").prompt == "x");
  // The optional fields without effect are skipped, whatever they hold, so long as it is JSON.
  CHECK(parse_ok(C, R"({"prompt":"x","metadata":1e400,"store":[[[{"a":[null,true,"\u00e9"]}]]],"service_tier":{},
      "parallel_tool_calls":true,"prompt_cache_key":"k","safety_identifier":"s","unheard_of":null})").prompt == "x");
}

TEST_CASE("logit_bias, echo and the harmless OpenAI fields are read") {
  const auto r = parse_ok(C, R"({"prompt":"a","logit_bias":{"5":-100,"17":2.5,"5":100},"echo":true,"best_of":1})");
  CHECK(r.sampling.logit_bias == std::vector<std::pair<token_id, float>>{{5, 100.0f}, {17, 2.5f}});
  CHECK(r.echo);
  CHECK(r.sampling.prompt_logprobs == -1);
  // echo with logprobs: the prompt's tokens get theirs, with as many alternatives.
  CHECK(parse_ok(C, R"({"prompt":"a","echo":true,"logprobs":3})").sampling.prompt_logprobs == 3);
  CHECK(parse_ok(C, R"({"prompt":"a","echo":false,"logprobs":3})").sampling.prompt_logprobs == -1);
  const auto h = parse_ok(H, R"({"messages":[{"role":"user","content":"a"}],"logit_bias":{"0":1},
      "response_format":{"type":"text"},"tools":null,"user":"u","metadata":{"k":"v"},"store":false})");
  CHECK(h.sampling.logit_bias.size() == 1);
  CHECK(parse_error(C, R"({"prompt":"a","suffix":"z"})").message == "suffix is not supported yet");
  {
    const auto r = parse_ok(C, R"({"prompt":"a","n":2,"best_of":3})");
    CHECK(r.n == 2);
    CHECK(r.best_of == 3);
    const auto c = parse_ok(H, R"({"messages":[{"role":"user","content":"a"}],"n":4,"stream":true})");
    CHECK(c.n == 4);
    CHECK(c.best_of == 4);
  }
  CHECK(parse_error(C, R"({"prompt":"a","logit_bias":{"4":-101}})").message ==
        "logit_bias must map to biases in [-100, 100], got -101 for token 4");
  // The WebSocket envelope's id and type are a chat message's fields there only.
  const auto ws = R"({"id":7,"type":"chat","messages":[{"role":"user","content":"a"}]})";
  CHECK(std::get<generation_request>(parse_request(H, ws, {}, true)).unknown_fields.empty());
  CHECK(parse_ok(H, ws).unknown_fields == std::vector<std::string>{"id", "type"});
}

TEST_CASE("a chat request: roles, content parts, logprobs") {
  const auto r = parse_ok(H, R"({"model":"m","messages":[
      {"role":"developer","content":"Be brief."},
      {"role":"system","content":"Sys."},
      {"role":"user","name":"ann","content":[{"type":"text","text":"Hello, "},{"type":"text","text":"wörld 🙂"}]},
      {"role":"assistant","content":"Hi."},
      {"role":"user","content":[]}],
      "logprobs":true,"top_logprobs":5,"stream":true})");
  REQUIRE(r.messages.size() == 5);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[0].content == "Be brief.");
  CHECK(r.messages[1].role == "system");
  CHECK(r.messages[2].role == "user");
  CHECK(r.messages[2].content == "Hello, w\xc3\xb6rld \xf0\x9f\x99\x82");
  CHECK(r.messages[3].role == "assistant");
  CHECK(r.messages[3].content == "Hi.");
  CHECK(r.messages[4].content == "");
  CHECK(r.prompt.empty());
  CHECK(r.want_logprobs);
  CHECK(r.top_logprobs == 5);
  CHECK(r.sampling.logprobs == 5);
  CHECK(r.stream);
  CHECK_FALSE(r.include_usage);

  const auto plain = parse_ok(H, R"({"messages":[{"role":"user","content":"a"}],"logprobs":true})");
  CHECK(plain.want_logprobs);
  CHECK(plain.top_logprobs == 0);
  CHECK(plain.sampling.logprobs == 0);
  const auto off = parse_ok(H, R"({"messages":[{"role":"user","content":"a"}],"logprobs":false,"top_logprobs":0})");
  CHECK_FALSE(off.want_logprobs);
  CHECK(off.sampling.logprobs == -1);
}

TEST_CASE("structured output and tools: fields read into the request") {
  const auto with_schema = parse_ok(H, R"({"messages":[{"role":"user","content":"a"}],
      "response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})");
  CHECK(with_schema.sampling.grammar.find("root ::=") != std::string::npos);
  CHECK(parse_ok(H, R"({"messages":[{"role":"user","content":"a"}],"response_format":{"type":"text"}})").sampling.grammar.empty());
  CHECK(parse_ok(C, R"({"prompt":"a","guided_choice":["x","y"]})").sampling.grammar == "root ::= \"x\" | \"y\"\n");
  const auto r = parse_ok(H, R"({"messages":[{"role":"user","content":"a"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}},
                                                        {"id":"c2","type":"function","function":{"name":"g","arguments":"not json"}}]},
      {"role":"tool","tool_call_id":"c1","content":"42"}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},{"type":"function","function":{"name":"g"}}],
      "tool_choice":{"type":"function","function":{"name":"g"}},"parallel_tool_calls":false})");
  REQUIRE(r.tools.size() == 2);
  CHECK(r.tools[0].name == "f");
  CHECK(r.tools[0].parameters == R"({"type":"object"})");
  CHECK(r.tools[1].parameters.empty());
  CHECK(r.choice.what == api::tool_choice::mode::named);
  CHECK(r.choice.name == "g");
  CHECK_FALSE(r.parallel_tool_calls);
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[1].null_content);
  // Arguments that are a JSON object reach the template as that object; others stay a string.
  CHECK(r.messages[1].tool_calls_json ==
        R"([{"id":"c1","type":"function","function":{"name":"f","arguments":{"x": 1}}},)"
        R"({"id":"c2","type":"function","function":{"name":"g","arguments":"not json"}}])");
  CHECK(r.messages[2].tool_call_id == "c1");
  CHECK(parse_ok(H, R"({"messages":[{"role":"user","content":"a"}]})").choice.what == api::tool_choice::mode::none);
}

TEST_CASE("a field in nobody's table is listed in unknown_fields, in order, for the gateway to decide") {
  const auto r = parse_ok(endpoint::completions, R"({"prompt":"a","frobnicate":1,"zz":{"a":[1]},"store":false})");
  CHECK(r.unknown_fields == std::vector<std::string>{"frobnicate", "zz"}); // (store: OpenAI's, without effect)
  CHECK(parse_ok(endpoint::chat, R"({"messages":[{"role":"user","content":"a"}]})").unknown_fields.empty());
}

TEST_CASE("thinking_token_budget: chat reads it, completions refuse it, and it keys the response cache") {
  const auto with = parse_ok(endpoint::chat, R"({"messages":[{"role":"user","content":"a"}],"seed":1,"thinking_token_budget":5})");
  const auto without = parse_ok(endpoint::chat, R"({"messages":[{"role":"user","content":"a"}],"seed":1})");
  CHECK(with.sampling.thinking_budget == 5);
  CHECK(without.sampling.thinking_budget == -1);
  CHECK(!canonical_request(with, "v").empty());
  CHECK(canonical_request(with, "v") != canonical_request(without, "v"));
  const auto e = parse_error(endpoint::completions, R"({"prompt":"a","thinking_token_budget":5})");
  CHECK(e.param == "thinking_token_budget");
  CHECK(e.code == "unknown_parameter");
}
