#pragma once
// The request fields that constrain the output's shape, read into one GBNF
// grammar (sampling_params::grammar): OpenAI's response_format, vLLM's
// guided_json / guided_regex / guided_choice / guided_grammar.

#include "service/request/api_error.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::api {

/// One constraint as the request gave it, before it becomes a grammar.
struct output_constraint {
  enum class kind { none, json_object, json_schema, regex, choice, grammar };
  kind what = kind::none;
  std::string param;               ///< the field that gave it: "response_format", "guided_json"...
  std::string text;                ///< the schema's JSON, the regex or the GBNF
  std::vector<std::string> choices;
};

/// The grammar of `c`, checked by the grammar reader; "" for none. A schema,
/// regex or grammar that cannot be honoured is a 400 naming the field and
/// the keyword: code invalid_value, e.g. "response_format.json_schema.schema:
/// 'oneOf' at /properties/a is not supported".
auto constraint_grammar(const output_constraint& c) -> std::variant<std::string, api_error>;

} // namespace troupe::api
