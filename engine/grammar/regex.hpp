#pragma once
// Regular expressions (the ECMA-262 subset JSON Schema's `pattern` and
// vLLM's guided_regex use) written as a GBNF expression.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

/// A string of characters from one set, between lo and hi of them (hi -1:
/// no bound): what a pattern ^A*$, ^A+$, ^A?$, ^A{m}$, ^A{m,}$ or ^A{m,n}$
/// with A one class, `.`, escape or character allows, and what minLength /
/// maxLength allow (every character). Two of them intersect.
struct char_run {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> set; ///< code-point ranges
  std::int64_t lo = 0, hi = -1;
};

/// `re` as a char_run, or none when it is not one (or not a regex troupe reads).
auto pattern_run(std::string_view re) -> std::optional<char_run>;
/// Every character, lo to hi of them.
auto length_run(std::int64_t lo, std::int64_t hi) -> char_run;
/// The characters both allow, as many as both allow.
auto intersect(const char_run& a, const char_run& b) -> char_run;
/// The run as a GBNF expression in `target` (bounds past GBNF's 10,000
/// repetitions in blocks of 10,000). Throws grammar_error when it allows no
/// string (an empty set with lo > 0, lo > hi) or lo is over 10,000.
auto run_to_gbnf(const char_run& run, regex_target target) -> std::string;
/// `item` repeated lo to hi times (hi -1: no bound), in blocks of 10,000
/// past GBNF's repetition limit; throws grammar_error for lo over 10,000.
auto repeat_gbnf(const std::string& item, std::int64_t lo, std::int64_t hi) -> std::string;

} // namespace troupe::grammar
