#include "service/tools/reasoning_parser.hpp"

#include "engine/grammar/compiled_grammar.hpp"

#include <memory>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using troupe::tools::reasoning_parser;

namespace {

struct whole {
  std::string reasoning, content;
};

/// The answer fed in pieces of `step` bytes (0: whole), joined.
auto run(std::string_view text, bool inside, std::size_t step) -> whole {
  reasoning_parser p(inside);
  whole out;
  for (std::size_t i = 0; i < text.size();) {
    const auto n = step == 0 ? text.size() : std::min(step, text.size() - i);
    auto s = p.feed(text.substr(i, n));
    out.reasoning += s.reasoning;
    out.content += s.content;
    i += n;
  }
  auto s = p.finish();
  out.reasoning += s.reasoning;
  out.content += s.content;
  return out;
}

} // namespace

TEST_CASE("a <think> block is split from the answer, however the text is cut") {
  struct example {
    std::string text;
    bool inside;
    std::string reasoning, content;
  };
  const std::vector<example> examples = {
      {"<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, "\nLet me see.\n", "\n\nThe answer is 4."},
      {"  \n<think>a<b</thin</think>c", false, "a<b</thin", "c"},
      {"No thinking here.", false, "", "No thinking here."},
      {"<thinking> is not the marker", false, "", "<thinking> is not the marker"},
      {"The prompt opened it.</think>Done", true, "The prompt opened it.", "Done"},
      {"never closed <thi", true, "never closed <thi", ""},
      {"<think>cut off", false, "cut off", ""},
      {"<thi", false, "", "<thi"},
      {"", false, "", ""},
  };
  for (const auto& e : examples)
    for (const std::size_t step : {0, 1, 2, 3, 7}) {
      INFO(e.text << " in pieces of " << step);
      const auto got = run(e.text, e.inside, step);
      CHECK(got.reasoning == e.reasoning);
      CHECK(got.content == e.content);
    }
}

TEST_CASE("whether a rendered prompt ends inside a thinking block") {
  CHECK(reasoning_parser::prompt_opens("<|Assistant|><think>\n"));
  CHECK_FALSE(reasoning_parser::prompt_opens("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  CHECK_FALSE(reasoning_parser::prompt_opens("<think>x</think> and then <|im_start|>assistant\n"));
  CHECK_FALSE(reasoning_parser::prompt_opens("no markers"));
  CHECK_FALSE(reasoning_parser::prompt_opens("<think> already thinking"));
}

TEST_CASE("a grammar applies after the thinking: the block is free text, closed before the answer") {
  using namespace troupe;
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  auto vocab = std::make_shared<grammar::token_vocabulary>(bytes, std::vector<token_id>{});
  const std::string answer = "root ::= \"{\" [a-z]* \"}\"  # root, in a comment, stays\nx ::= \"root\"\n";
  const auto accepts = [&](bool inside, std::string_view text) {
    grammar::compiled_grammar g(grammar::parse_gbnf(reasoning_parser::grammar_after(answer, inside)), vocab);
    const auto s = g.advance(g.start(), text);
    return s != grammar::compiled_grammar::dead && g.can_end(s);
  };
  CHECK(accepts(false, "{ab}"));
  CHECK(accepts(false, "<think>let me see</think>\n\n{ab}"));
  CHECK(accepts(false, "\n<think>a </thin </think{ <<</think>{}"));
  CHECK_FALSE(accepts(false, "<think>a</think>x{}"));
  CHECK_FALSE(accepts(false, "<think>a</think></think>{}"));
  CHECK_FALSE(accepts(false, "<think>never closed {}"));
  CHECK(accepts(true, "thinking already</think>{z}"));
  CHECK_FALSE(accepts(true, "{z}"));
  CHECK(grammar::rename_rule("root ::= a \"root\" [root] # root\na ::= root-x root", "root", "r") ==
        "r ::= a \"root\" [root] # root\na ::= root-x r");
}

TEST_CASE("a grammar wrapped after the thinking parses whatever its last line and first rule") {
  using namespace troupe;
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  auto vocab = std::make_shared<grammar::token_vocabulary>(bytes, std::vector<token_id>{});
  // No newline at the end (the wrapper's rules once ran into its last
  // rule), a first rule other than root, a comment last.
  for (const std::string answer : {"r0 ::= \"x\"\nroot ::= r0", "root ::= \"x\"", "root ::= \"x\" # the end"})
    for (const bool inside : {false, true}) {
      CAPTURE(answer);
      grammar::compiled_grammar g(grammar::parse_gbnf(reasoning_parser::grammar_after(answer, inside)), vocab);
      const auto s = g.advance(g.start(), inside ? "ok</think>x" : "<think>ok</think>x");
      CHECK((s != grammar::compiled_grammar::dead && g.can_end(s)));
    }
  // A grammar that names the wrapper's own rules is refused, never merged.
  CHECK_THROWS_AS((void)grammar::parse_gbnf(reasoning_parser::grammar_after("root ::= think-q0\nthink-q0 ::= \"a\"", false)),
                  grammar::grammar_error);
}
