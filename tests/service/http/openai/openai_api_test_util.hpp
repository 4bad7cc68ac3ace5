#pragma once
// Helpers of the OpenAI API tests (actors/openai_api, actors/openai_api_responses):
// requests parsed or refused, and responses parsed back so that the tests
// read fields, not text.

#include "service/http/openai/openai_api.hpp"
#include "service/http/openai/openai_format.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <string>
#include <string_view>

namespace troupe::testing {

using namespace api;

inline auto parse_ok(endpoint kind, std::string_view body, const sampling_params& defaults = {})
    -> generation_request {
  auto result = parse_request(kind, body, defaults);
  if (auto* e = std::get_if<api_error>(&result)) FAIL("unexpected error: " << e->message << " in " << body);
  return std::get<generation_request>(std::move(result));
}

inline auto parse_error(endpoint kind, std::string_view body) -> api_error {
  auto result = parse_request(kind, body, {});
  if (std::holds_alternative<generation_request>(result)) FAIL("parsed, but should not: " << body);
  return std::get<api_error>(std::move(result));
}

/// A response parsed back, so the tests read fields, not text.
struct json_doc {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  explicit json_doc(const std::string& text) {
    const auto e = parser.parse(text).get(root);
    REQUIRE_MESSAGE(e == simdjson::SUCCESS, "not valid JSON: " << text);
  }
};

inline auto str(simdjson::simdjson_result<simdjson::dom::element> e) -> std::string {
  return std::string(e.get_string().value());
}

inline auto num(simdjson::simdjson_result<simdjson::dom::element> e) -> double { return e.get_double().value(); }

inline auto integer(simdjson::simdjson_result<simdjson::dom::element> e) -> std::int64_t {
  return e.get_int64().value();
}

inline auto is_null(simdjson::simdjson_result<simdjson::dom::element> e) -> bool {
  return e.error() == simdjson::SUCCESS && e.value().is_null();
}

inline auto absent(simdjson::simdjson_result<simdjson::dom::element> e) -> bool {
  return e.error() == simdjson::NO_SUCH_FIELD;
}

struct error_case {
  endpoint kind;
  std::string body;
  std::string param;
  std::string code;
};

inline constexpr auto C = endpoint::completions;
inline constexpr auto H = endpoint::chat;

} // namespace troupe::testing
