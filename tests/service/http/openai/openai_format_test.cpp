// Responses of the OpenAI API: stream chunks, full responses, logprobs,
// the models list and error bodies.

#include "tests/service/http/openai/openai_api_test_util.hpp"
#include "base/json_text.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <cmath>
#include <limits>

using namespace troupe;
using namespace troupe::api;
using namespace troupe::testing;

TEST_CASE("json_string escapes what JSON needs and passes UTF-8 through") {
  CHECK(json_text::quoted("\"\\\n\x01") == R"("\"\\\n\u0001")");
  CHECK(json_text::quoted("\t\r\b\f\x1f\x7f/") == "\"\\t\\r\\b\\f\\u001f\x7f/\"");
  const std::string utf8 = "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x99\x82";
  CHECK(json_text::quoted(utf8) == "\"" + utf8 + "\"");
  // Bytes that are not UTF-8 (a token that is half a character) become U+FFFD.
  // One U+FFFD per broken sequence, as Python's errors="replace" gives.
  CHECK(json_text::quoted("a\xe2\x82" "b") == "\"a\xef\xbf\xbd" "b\"");
  CHECK(json_text::quoted("\xe4\xb8") == "\"\xef\xbf\xbd\"");
  CHECK(json_text::quoted("\x80\xbf") == "\"\xef\xbf\xbd\xef\xbf\xbd\"");
  CHECK(json_text::quoted("\xc0\xaf") == "\"\xef\xbf\xbd\xef\xbf\xbd\"");
  CHECK(json_text::quoted("\xed\xa0\x80") == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
  CHECK(json_text::quoted("\xe0\x80\x80") == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
  CHECK(json_text::quoted("\xf4\x90\x80\x80") == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
  CHECK(json_text::quoted("\xf0\x9f\x99") == "\"\xef\xbf\xbd\"");

  // And every one reads back as the string it came from.
  for (const std::string& s : {std::string("\"\\\n\x01"), std::string("\t\r\b\f\x1f\x7f/"), utf8,
                              std::string(1, '\0') + "x"}) {
    json_doc doc(json_text::quoted(s));
    CHECK(std::string(doc.root.get_string().value()) == s);
  }
}

TEST_CASE("stream chunks: object names, delta role only first, finish_reason null or a string, usage null") {
  const response_head h{"cmpl-7", 1700000000, "tiny"};
  {
    json_doc d(stream_chunk(C, h, "Hel\"lo\n", "", nullptr, 0, true, false));
    CHECK(str(d.root["id"]) == "cmpl-7");
    CHECK(str(d.root["object"]) == "text_completion");
    CHECK(integer(d.root["created"]) == 1700000000);
    CHECK(str(d.root["model"]) == "tiny");
    CHECK(d.root["choices"].get_array().value().size() == 1);
    CHECK(integer(d.root["choices"].at(0)["index"]) == 0);
    CHECK(str(d.root["choices"].at(0)["text"]) == "Hel\"lo\n");
    CHECK(is_null(d.root["choices"].at(0)["logprobs"]));
    CHECK(is_null(d.root["choices"].at(0)["finish_reason"]));
    CHECK(absent(d.root["usage"]));
  }
  {
    const std::vector<token_logprob> none;
    json_doc d(stream_chunk(C, h, "", "length", &none, 0, false, true));
    CHECK(str(d.root["choices"].at(0)["finish_reason"]) == "length");
    CHECK(is_null(d.root["choices"].at(0)["logprobs"]));
    CHECK(is_null(d.root["usage"]));
  }
  {
    json_doc d(stream_chunk(H, h, "Hi", "", nullptr, 0, true, true));
    CHECK(str(d.root["object"]) == "chat.completion.chunk");
    const auto delta = d.root["choices"].at(0)["delta"];
    CHECK(str(delta["role"]) == "assistant");
    CHECK(str(delta["content"]) == "Hi");
    CHECK(absent(d.root["choices"].at(0)["text"]));
    CHECK(is_null(d.root["choices"].at(0)["finish_reason"]));
    CHECK(is_null(d.root["usage"]));
  }
  {
    json_doc d(stream_chunk(H, h, " there", "stop", nullptr, 0, false, false));
    const auto delta = d.root["choices"].at(0)["delta"];
    CHECK(absent(delta["role"]));
    CHECK(str(delta["content"]) == " there");
    CHECK(str(d.root["choices"].at(0)["finish_reason"]) == "stop");
    CHECK(absent(d.root["usage"]));
  }
}

TEST_CASE("the usage chunk has no choices and counts the total") {
  const response_head h{"chatcmpl-1", 5, "m"};
  for (const auto kind : {C, H}) {
    json_doc d(usage_chunk(kind, h, usage{11, 4}));
    CHECK(str(d.root["object"]) == (kind == C ? "text_completion" : "chat.completion.chunk"));
    CHECK(str(d.root["id"]) == "chatcmpl-1");
    CHECK(d.root["choices"].get_array().value().size() == 0);
    CHECK(integer(d.root["usage"]["prompt_tokens"]) == 11);
    CHECK(integer(d.root["usage"]["completion_tokens"]) == 4);
    CHECK(integer(d.root["usage"]["total_tokens"]) == 15);
  }
}

TEST_CASE("full responses for both endpoints") {
  const response_head h{"id-9", 42, "tiny"};
  {
    json_doc d(full_response(C, h, "text\x01", "stop", nullptr, usage{3, 2}));
    CHECK(str(d.root["object"]) == "text_completion");
    CHECK(str(d.root["id"]) == "id-9");
    CHECK(integer(d.root["created"]) == 42);
    const auto choice = d.root["choices"].at(0);
    CHECK(integer(choice["index"]) == 0);
    CHECK(str(choice["text"]) == "text\x01");
    CHECK(is_null(choice["logprobs"]));
    CHECK(str(choice["finish_reason"]) == "stop");
    CHECK(integer(d.root["usage"]["total_tokens"]) == 5);
  }
  {
    json_doc d(full_response(H, h, "\xe4\xb8\x96", "length", nullptr, usage{7, 1}));
    CHECK(str(d.root["object"]) == "chat.completion");
    const auto choice = d.root["choices"].at(0);
    CHECK(str(choice["message"]["role"]) == "assistant");
    CHECK(str(choice["message"]["content"]) == "\xe4\xb8\x96");
    CHECK(str(choice["finish_reason"]) == "length");
    CHECK(integer(d.root["usage"]["prompt_tokens"]) == 7);
    CHECK(integer(d.root["usage"]["completion_tokens"]) == 1);
    CHECK(integer(d.root["usage"]["total_tokens"]) == 8);
  }
  {
    json_doc d(full_response(C, h, "", "", nullptr, usage{}));
    CHECK(is_null(d.root["choices"].at(0)["finish_reason"]));
  }
}

namespace {

auto sample_logprobs() -> std::vector<token_logprob> {
  const float ninf = -std::numeric_limits<float>::infinity();
  return {
      {"H\xc3\xa9", -0.25f, {{"H\xc3\xa9", -0.25f}, {"He", -2.5f}}, false},
      {"llo", ninf, {}, false},
      {" \xe4\xb8", -1.0f / 3.0f, {{" \xe4\xb8", -1.0f / 3.0f}, {"\"q\"", std::nanf("")}}, false},
  };
}

} // namespace

TEST_CASE("completions logprobs: tokens, token_logprobs, top_logprobs, text_offset in code points") {
  const auto lps = sample_logprobs();
  json_doc d(stream_chunk(C, {"x", 1, "m"}, "H\xc3\xa9llo \xe4\xb8", "", &lps, 10, true, false));
  const auto l = d.root["choices"].at(0)["logprobs"];
  CHECK(l["tokens"].get_array().value().size() == 3);
  CHECK(str(l["tokens"].at(0)) == "H\xc3\xa9");
  CHECK(str(l["tokens"].at(1)) == "llo");
  CHECK(str(l["tokens"].at(2)) == "bytes: \\xe4\\xb8"); // half of 世, as OpenAI writes it: the JSON stays UTF-8
  CHECK(num(l["top_logprobs"].at(2)["bytes: \\xe4\\xb8"]) == doctest::Approx(-1.0 / 3.0));
  CHECK(static_cast<float>(num(l["token_logprobs"].at(0))) == -0.25f);
  CHECK(num(l["token_logprobs"].at(1)) == -9999.0);
  CHECK(static_cast<float>(num(l["token_logprobs"].at(2))) == -1.0f / 3.0f);
  CHECK(l["top_logprobs"].get_array().value().size() == 3);
  CHECK(l["top_logprobs"].at(0).get_object().value().size() == 2);
  CHECK(static_cast<float>(num(l["top_logprobs"].at(0)["He"])) == -2.5f);
  CHECK(static_cast<float>(num(l["top_logprobs"].at(0)["H\xc3\xa9"])) == -0.25f);
  CHECK(l["top_logprobs"].at(1).get_object().value().size() == 0);
  CHECK(num(l["top_logprobs"].at(2)["\"q\""]) == -9999.0);
  // "Hé" is 2 characters (3 bytes), "llo" 3.
  CHECK(integer(l["text_offset"].at(0)) == 10);
  CHECK(integer(l["text_offset"].at(1)) == 12);
  CHECK(integer(l["text_offset"].at(2)) == 15);

  // Non-streamed: the same shape, offsets from 0.
  json_doc full(full_response(C, {"x", 1, "m"}, "", "stop", &lps, usage{1, 3}));
  const auto fl = full.root["choices"].at(0)["logprobs"];
  CHECK(integer(fl["text_offset"].at(0)) == 0);
  CHECK(integer(fl["text_offset"].at(2)) == 5);
}

TEST_CASE("logprobs of byte pieces: raw bytes, \"bytes:\\\\xNN\" tokens, offsets at their character; null for none") {
  // 世 (E4 B8 96) as three byte-fallback pieces between "a" and "\n".
  const std::vector<token_logprob> lps = {
      {"a", -1.0f, {}, true}, {"\xe4", -1.0f, {{"\xe4", -1.0f}, {"\x7f\\", -2.0f}}, false}, {"\xb8", -1.0f, {}, false},
      {"\x96", -1.0f, {}, false}, {"\n", -1.0f, {}, false}};
  json_doc d(full_response(C, {"x", 1, "m"}, "a\xe4\xb8\x96\n", "stop", &lps, usage{1, 5}));
  const auto l = d.root["choices"].at(0)["logprobs"];
  CHECK(str(l["tokens"].at(0)) == "a");
  CHECK(is_null(l["token_logprobs"].at(0))); // an echoed prompt's first token: no logprob
  CHECK(is_null(l["top_logprobs"].at(0)));
  CHECK(num(l["token_logprobs"].at(1)) == -1.0);
  CHECK(str(l["tokens"].at(1)) == "bytes:\\xe4");
  CHECK(str(l["tokens"].at(2)) == "bytes:\\xb8");
  CHECK(str(l["tokens"].at(4)) == "\n");
  CHECK(num(l["top_logprobs"].at(1)["bytes:\\xe4"]) == -1.0);
  CHECK(num(l["top_logprobs"].at(1)["\x7f\\"]) == -2.0); // DEL and a backslash are UTF-8: text
  const std::int64_t offsets[] = {0, 1, 1, 1, 2};
  for (int i = 0; i < 5; ++i) CHECK(integer(l["text_offset"].at(i)) == offsets[i]);

  json_doc c(full_response(H, {"x", 1, "m"}, "a\xe4\xb8\x96\n", "stop", &lps, usage{1, 5}));
  const auto content = c.root["choices"].at(0)["logprobs"]["content"];
  std::string joined;
  for (int i = 0; i < 5; ++i) {
    const auto bytes = content.at(i)["bytes"];
    for (std::size_t j = 0; j < bytes.get_array().value().size(); ++j) joined += static_cast<char>(integer(bytes.at(j)));
  }
  CHECK(joined == "a\xe4\xb8\x96\n");
  CHECK(str(content.at(3)["token"]) == "bytes:\\x96");
  CHECK(str(content.at(1)["top_logprobs"].at(0)["token"]) == "bytes:\\xe4");
  CHECK(integer(content.at(1)["top_logprobs"].at(0)["bytes"].at(0)) == 0xe4);
}

TEST_CASE("chat logprobs: content entries with bytes and top_logprobs") {
  const auto lps = sample_logprobs();
  for (const bool streamed : {true, false}) {
    CAPTURE(streamed);
    json_doc d(streamed ? stream_chunk(H, {"x", 1, "m"}, "", "", &lps, 0, false, false)
                        : full_response(H, {"x", 1, "m"}, "", "stop", &lps, usage{}));
    const auto content = d.root["choices"].at(0)["logprobs"]["content"];
    REQUIRE(content.get_array().value().size() == 3);
    CHECK(str(content.at(0)["token"]) == "H\xc3\xa9");
    CHECK(static_cast<float>(num(content.at(0)["logprob"])) == -0.25f);
    const auto bytes = content.at(0)["bytes"];
    REQUIRE(bytes.get_array().value().size() == 3);
    CHECK(integer(bytes.at(0)) == 72);
    CHECK(integer(bytes.at(1)) == 195);
    CHECK(integer(bytes.at(2)) == 169);
    const auto top = content.at(0)["top_logprobs"];
    REQUIRE(top.get_array().value().size() == 2);
    CHECK(str(top.at(1)["token"]) == "He");
    CHECK(static_cast<float>(num(top.at(1)["logprob"])) == -2.5f);
    CHECK(top.at(1)["bytes"].get_array().value().size() == 2);
    CHECK(num(content.at(1)["logprob"]) == -9999.0);
    CHECK(content.at(1)["top_logprobs"].get_array().value().size() == 0);
    // Half a character: the token as OpenAI shows it, bytes keep the truth.
    CHECK(str(content.at(2)["token"]) == "bytes: \\xe4\\xb8");
    REQUIRE(content.at(2)["bytes"].get_array().value().size() == 3);
    CHECK(integer(content.at(2)["bytes"].at(1)) == 0xe4);
    CHECK(integer(content.at(2)["bytes"].at(2)) == 0xb8);
    CHECK(num(content.at(2)["top_logprobs"].at(1)["logprob"]) == -9999.0);
  }
}

TEST_CASE("models list and error bodies") {
  {
    json_doc d(models_list({{"tiny\"llama", 2048}}, 123));
    CHECK(str(d.root["object"]) == "list");
    REQUIRE(d.root["data"].get_array().value().size() == 1);
    const auto m = d.root["data"].at(0);
    CHECK(str(m["id"]) == "tiny\"llama");
    CHECK(str(m["object"]) == "model");
    CHECK(integer(m["created"]) == 123);
    CHECK(str(m["owned_by"]) == "troupe");
    CHECK(integer(m["max_model_len"]) == 2048);
    json_doc two(models_list({{"a", 1}, {"b", 2}}, 5));
    REQUIRE(two.root["data"].get_array().value().size() == 2);
    CHECK(str(two.root["data"].at(1)["id"]) == "b");
  }
  {
    json_doc d(error_body(api_error{404, "The model `x` does not exist.", "NotFoundError", "model", "model_not_found"}));
    const auto e = d.root["error"];
    CHECK(str(e["message"]) == "The model `x` does not exist.");
    CHECK(str(e["type"]) == "NotFoundError");
    CHECK(str(e["param"]) == "model");
    CHECK(str(e["code"]) == "model_not_found");
  }
  {
    json_doc d(error_body(api_error{503, "overloaded", "server_error", "", ""}));
    CHECK(is_null(d.root["error"]["param"]));
    CHECK(is_null(d.root["error"]["code"]));
    CHECK(str(d.root["error"]["type"]) == "server_error");
  }
  // A parse error's body round-trips.
  const auto e = parse_error(C, R"({"prompt":"a","n":200})");
  json_doc d(error_body(e));
  CHECK(str(d.root["error"]["message"]) == "n must be between 1 and 128, got 200");
  CHECK(str(d.root["error"]["param"]) == "n");
  CHECK(str(d.root["error"]["code"]) == "invalid_value");
}
