#pragma once
// Regular expressions (the ECMA-262 subset JSON Schema's `pattern` and
// vLLM's guided_regex use) written as a GBNF expression.

#include <string>
#include <string_view>

namespace troupe::grammar {

/// Where the regex's characters go: `text` as they are, or `json_string`
/// inside a JSON string, so `"`, `\` and control characters become their
/// JSON escapes (the regex speaks of the decoded string).
enum class regex_target { text, json_string };

/// A GBNF expression (no rule names, parenthesized) matching what `re`
/// matches wholly. Literals, `.`, [classes] with ranges and negation, \d \w
/// \s \D \W \S, \n \t \r \f \v \0 \xHH \uHHHH and escaped punctuation,
/// groups ( ), (?: ) and (?<name> ), |, * + ? {m} {m,} {m,n} (a lazy `?`
/// after them changes nothing here). `^` and `$` are accepted at the ends.
/// With `search` (JSON Schema's semantics), a side without its anchor may
/// have any text there. Throws grammar_error naming what it does not
/// support: backreferences, lookaround, \b, flags, anchors in the middle.
auto regex_to_gbnf(std::string_view re, regex_target target, bool search = false) -> std::string;

} // namespace troupe::grammar
