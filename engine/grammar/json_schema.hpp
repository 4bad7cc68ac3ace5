#pragma once
// JSON Schema to GBNF: the subset OpenAI's strict structured outputs allow,
// and a little more. What it writes always validates against the schema:
// where a keyword cannot be expressed exactly, the grammar writes a subset of
// the valid values (numbers of at most 16 digits, no exponents; declared
// properties only, in their order), never a superset. A keyword it cannot
// honour even so is refused, by name.

#include <string>
#include <string_view>
#include <vector>

namespace troupe::grammar {

/// Collects the rules of one or more schemas into one grammar text. JSON
/// between tokens is compact or lightly formatted: one space, or a newline
/// and up to 20 spaces or tabs (so whitespace cannot run forever).
class json_schema_grammar {
public:
  json_schema_grammar();

  /// Adds the rules of `schema` (JSON text) and returns the name of its
  /// rule. Supported: type (one or a list), properties, required,
  /// additionalProperties (false, true or a schema: declared properties are
  /// written when there are any, else pairs under the schema), items,
  /// prefixItems, minItems, maxItems, enum, const, anyOf, allOf of one,
  /// $ref to #, #/$defs/X or #/definitions/X (recursion allowed), string
  /// minLength, maxLength, pattern, format (date, time, date-time, uuid,
  /// email, ipv4, hostname), number and integer minimum, maximum,
  /// exclusiveMinimum, exclusiveMaximum; annotations (title, description,
  /// default, examples, $schema, $id, $comment, deprecated, readOnly,
  /// writeOnly) ignored. `true` and `{}` are any JSON value. Throws
  /// grammar_error naming the keyword and where it is ("'oneOf' at
  /// /properties/a is not supported").
  auto add(std::string_view schema, std::string_view name = "root") -> std::string;

  /// The rule for any JSON value, and for any JSON object.
  auto any_value() -> std::string;
  auto any_object() -> std::string;

  /// A rule `name ::= body`, with body GBNF; for callers that wrap schemas.
  void add_rule(const std::string& name, const std::string& body);

  /// Every rule so far, as GBNF text.
  auto text() const -> std::string;

private:
  struct impl;
  std::vector<std::pair<std::string, std::string>> rules_;
  int next_ = 0;
  friend struct impl;
};

/// Convenience: the whole grammar of one schema, its rule named root.
auto json_schema_to_gbnf(std::string_view schema) -> std::string;

/// Any JSON object (response_format {"type": "json_object"}).
auto json_object_gbnf() -> std::string;

/// Exactly one of `choices` (vLLM's guided_choice); at least one.
auto choice_gbnf(const std::vector<std::string>& choices) -> std::string;

} // namespace troupe::grammar
