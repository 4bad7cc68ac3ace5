// libFuzzer harness (make fuzz): the grammar writers and reader on any
// bytes, as GBNF, as a JSON schema and as a regex, and through the rewrites
// a request's grammar goes through: wrapped after a reasoning model's
// thinking block (open or not yet), and a tool's parameters schema as a
// forced call in each tool-call format. What compiles is run: a few bytes
// of the input fed through the automaton and a token mask taken at each,
// then the forced bytes taken as tokens. Every input must give a grammar or
// a grammar_error, never a crash or a hang.

#include "engine/grammar/grammar_matcher.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/grammar/regex.hpp"
#include "service/tools/reasoning_parser.hpp"
#include "service/tools/tool_grammar.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  using troupe::grammar::compiled_grammar;
  auto g = std::make_shared<compiled_grammar>(troupe::grammar::parse_gbnf(gbnf), vocabulary());
  troupe::grammar::grammar_matcher m(g);
  // (Ids 0 to 255 are the single bytes.)
  for (std::size_t i = 0; i < feed.size() && i < 64 && m.state() != compiled_grammar::dead; ++i) {
    m.prepare(static_cast<std::int32_t>(64 - i));
    m.accept(static_cast<unsigned char>(feed[i]));
  }
  if (m.state() == compiled_grammar::dead) return;
  // Jump-forward: the forced bytes as the longest tokens. The grammar must
  // take every one, and they must write the forced bytes (all of them, when
  // fewer than the 16 asked for: every byte is a token here).
  const auto forced = g->forced_bytes(m.state(), 4096);
  std::vector<troupe::token_id> out;
  m.take_forced(16, out);
  if (m.state() == compiled_grammar::dead) __builtin_trap();
  std::string written;
  for (const auto id : out) written += vocabulary()->surface(id);
  if (!forced.starts_with(written) || (out.size() < 16 && written != forced)) __builtin_trap();
}

} // namespace

/// The grammar as the sink sends it to a reasoning model: after its
/// thinking block, which the prompt opened (`inside`) or the model may.
void run_wrapped(const std::string& gbnf, std::string_view feed, bool inside) {
  using troupe::tools::reasoning_parser;
  run(reasoning_parser::grammar_after(gbnf, inside), inside ? "</think>" + std::string(feed) : feed);
}

/// A tool whose parameters schema is `schema`, forced in each format.
void run_tools(std::string_view schema, std::size_t size) {
  using troupe::api::tool_choice;
  const std::vector<troupe::api::tool_spec> tools = {{"f", std::string(schema)}, {"g", ""}};
  const tool_choice choice{size % 2 ? tool_choice::mode::required : tool_choice::mode::named, "f"};
  for (const char* family : {"hermes", "llama3_json", "mistral"}) {
    try {
      const auto gbnf = troupe::tools::tool_call_grammar(family, tools, choice, size % 3 == 0);
      run(gbnf, "<tool_call>\n{\"name\": \"f\", \"arguments\": {");
      run_wrapped(gbnf, "{\"name\": \"f\"", size % 2);
    } catch (const troupe::grammar::grammar_error&) {}
  }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using troupe::grammar::grammar_error;
  try { run(std::string(text), text); } catch (const grammar_error&) {}
  try { run_wrapped(std::string(text), text, size % 2); } catch (const grammar_error&) {}
  run_tools(text, size);
  try { run(troupe::grammar::json_schema_to_gbnf(text), "{\"a\": [1, \"x\"]}"); } catch (const grammar_error&) {}
  try { run("root ::= " + troupe::grammar::regex_to_gbnf(text, troupe::grammar::regex_target::text, size % 2), text); }
  catch (const grammar_error&) {}
  return 0;
}
