#pragma once
// A context-free grammar over bytes, read from GBNF text (llama.cpp's
// grammar format, which vLLM's guided_grammar and XGrammar also take).
// Everything that constrains decoding (a JSON schema, a regex, a list of
// choices, a tool call) is first written as GBNF text, so the text is what a
// request carries (sampling_params::grammar) and what the executor compiles.

#include <bitset>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::grammar {

/// A grammar that cannot be read or used: one line naming the place and the
/// problem ("line 3, column 7: undefined rule 'value'").
class grammar_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

using byte_set = std::bitset<256>;

/// One symbol of an alternative: a byte from a set, or a rule.
struct element {
  enum class kind : std::uint8_t { bytes, rule };
  kind what = kind::bytes;
  std::int32_t index = 0; ///< into grammar::sets or grammar::rules
};

struct rule {
  std::string name;
  std::vector<std::vector<element>> alternatives; ///< an empty one matches ""
};

/// Characters are UTF-8: a class like [^"\\] or "." is written as the byte
/// sequences of every code point it holds (surrogates excepted), so the
/// grammar accepts only valid UTF-8 where it says characters.
struct grammar {
  std::vector<rule> rules;
  std::vector<byte_set> sets;
  std::int32_t root = 0;
  /// Bytes the shortest string each rule derives has (all finite: checked).
  std::vector<std::int32_t> min_length;
};

/// Reads GBNF: `name ::= alternatives` rules (a rule runs until the next
/// `name ::=`), "literals" and [classes] with \n \r \t \\ \" \] \- \xHH
/// \uHHHH \UHHHHHHHH escapes, `.` (any character), (groups), `|`, postfix *
/// + ? {m} {m,} {m,n}, # comments. The rule named `root` is the start.
/// Checks that every rule used is defined, that none is left-recursive and
/// that each derives some finite string. Throws grammar_error.
auto parse_gbnf(std::string_view text) -> grammar;

/// A code point's UTF-8 bytes (the GBNF and regex writers' one encoder).
auto utf8_encode(std::uint32_t cp) -> std::string;

/// `gbnf` with the rule `from` renamed `to`, in its definition and every
/// reference (literals, classes and comments untouched): for wrapping a
/// grammar inside another.
auto rename_rule(std::string_view gbnf, std::string_view from, std::string_view to) -> std::string;

/// `s` as a GBNF string literal, quotes included, every byte that is not
/// printable ASCII escaped (\xHH, so any bytes round-trip).
auto gbnf_literal(std::string_view s) -> std::string;

} // namespace troupe::grammar
