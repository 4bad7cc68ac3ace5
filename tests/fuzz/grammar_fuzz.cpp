// libFuzzer harness (make fuzz): the grammar writers and reader on any
// bytes, as GBNF, as a JSON schema and as a regex; what compiles is run: a
// few bytes of the input fed through the automaton and a token mask taken
// at each, then the forced bytes taken as tokens. Every input must give a
// grammar or a grammar_error, never a crash or a hang.

#include "engine/grammar/compiled_grammar.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/grammar/regex.hpp"

#include <cstdint>

namespace {

auto vocabulary() -> std::shared_ptr<const troupe::grammar::token_vocabulary> {
  static const auto v = [] {
    std::vector<std::string> s;
    for (int b = 0; b < 256; ++b) s.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\":", "true", "null", "ab", "[[", "\n  ", "\xc3\xa9"}) s.emplace_back(t);
    s.emplace_back();
    const auto end = static_cast<troupe::token_id>(s.size() - 1);
    return std::make_shared<const troupe::grammar::token_vocabulary>(std::move(s), std::vector<troupe::token_id>{end});
  }();
  return v;
}

void run(const std::string& gbnf, std::string_view feed) {
  troupe::grammar::compiled_grammar g(troupe::grammar::parse_gbnf(gbnf), vocabulary());
  std::vector<std::uint64_t> mask;
  auto s = g.start();
  for (std::size_t i = 0; i < feed.size() && i < 64 && s != troupe::grammar::compiled_grammar::dead; ++i) {
    g.fill_mask(s, static_cast<std::int32_t>(64 - i), mask);
    s = g.advance(s, feed.substr(i, 1));
  }
  if (s == troupe::grammar::compiled_grammar::dead) return;
  // Jump-forward's way: the forced bytes as the longest tokens; the grammar
  // must take every one of them.
  const auto forced = g.forced_bytes(s, 16);
  for (std::string_view rest = forced; !rest.empty();) {
    const auto [id, len] = vocabulary()->longest_prefix(rest);
    if (id < 0 || len == 0) __builtin_trap(); // (every byte is a token here)
    s = g.advance(s, rest.substr(0, len));
    if (s == troupe::grammar::compiled_grammar::dead) __builtin_trap();
    rest.remove_prefix(len);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using troupe::grammar::grammar_error;
  try { run(std::string(text), text); } catch (const grammar_error&) {}
  try { run(troupe::grammar::json_schema_to_gbnf(text), "{\"a\": [1, \"x\"]}"); } catch (const grammar_error&) {}
  try { run("root ::= " + troupe::grammar::regex_to_gbnf(text, troupe::grammar::regex_target::text, size % 2), text); }
  catch (const grammar_error&) {}
  return 0;
}
