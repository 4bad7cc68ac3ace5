// The grammar core against independent judges: std::regex (ECMAScript) for
// the regex writer, arithmetic for the number ranges, and a brute-force
// token-by-token check for the masks.

#include "engine/grammar/compiled_grammar.hpp"
#include "engine/grammar/grammar_matcher.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/grammar/regex.hpp"

#include <doctest/doctest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

using namespace troupe;
using namespace troupe::grammar;

namespace {

/// A vocabulary of every single byte (so every string has a spelling),
/// plus a few longer tokens and an end token.
auto byte_vocabulary(std::vector<std::string> extra = {}) -> std::shared_ptr<const token_vocabulary> {
  std::vector<std::string> s;
  for (int b = 0; b < 256; ++b) s.emplace_back(1, static_cast<char>(b));
  for (auto& e : extra) s.push_back(std::move(e));
  s.emplace_back(); // the end token: no bytes
  const auto end = static_cast<token_id>(s.size() - 1);
  return std::make_shared<token_vocabulary>(std::move(s), std::vector<token_id>{end});
}

struct checker {
  std::shared_ptr<compiled_grammar> g;
  explicit checker(const std::string& gbnf) : g(std::make_shared<compiled_grammar>(parse_gbnf(gbnf), byte_vocabulary())) {}
  auto accepts(std::string_view text) -> bool {
    const auto s = g->advance(g->start(), text);
    return s != compiled_grammar::dead && g->can_end(s);
  }
  auto prefix_ok(std::string_view text) -> bool { return g->advance(g->start(), text) != compiled_grammar::dead; }
};

auto error_of(const std::string& gbnf) -> std::string {
  try {
    (void)parse_gbnf(gbnf);
  } catch (const grammar_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("GBNF: literals, classes, repetition, and UTF-8 characters") {
  checker c(R"(root ::= "a" [b-d]+ x{2,3} ("!" | "?")?
x ::= [^a-z]
)");
  CHECK(c.accepts("ab12"));
  CHECK(c.accepts("abcdZZZ!"));
  CHECK_FALSE(c.accepts("ab1"));
  CHECK_FALSE(c.accepts("ab1234"));
  CHECK_FALSE(c.accepts("abq12"));
  CHECK(c.accepts("ab\xc3\xa9\xe2\x82\xac")); // é€: characters, not bytes
  CHECK_FALSE(c.prefix_ok("ab\xc3\x41"));    // a broken character
  CHECK_FALSE(c.prefix_ok("ab\xed\xa0\x80")); // a surrogate is no character

  checker dot(R"(root ::= "<" .* ">")");
  CHECK(dot.accepts("<\xf0\x9f\x98\x80 x>"));
  CHECK_FALSE(dot.prefix_ok("<\xff"));

  checker esc(R"(root ::= "\x41\u00e9\n" [\]\-]{2})");
  CHECK(esc.accepts("A\xc3\xa9\n]-"));
}

TEST_CASE("GBNF: errors name the place") {
  CHECK(error_of("root ::= foo").find("undefined rule 'foo'") != std::string::npos);
  CHECK(error_of("start ::= \"a\"").find("no rule named 'root'") != std::string::npos);
  CHECK(error_of("root ::= root \"a\" | \"b\"").find("'root' is left-recursive") != std::string::npos);
  CHECK(error_of("root ::= a\na ::= \"\" a \"x\" | \"y\"").find("left-recursive") != std::string::npos);
  CHECK(error_of("root ::= \"a\" root").find("never ends") != std::string::npos);
  CHECK(error_of("root ::= \"abc").find("line 1, column") != std::string::npos);
  CHECK(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice") != std::string::npos);
  CHECK(error_of("root ::= [z-a]").find("backwards") != std::string::npos);
  CHECK(error_of("root ::= \"a\"{3,2}").find("m <= n") != std::string::npos);
}

TEST_CASE("GBNF: a multi-line rule and comments") {
  checker c("# numbers\nroot ::= item\n  | item \",\" root  # more\nitem ::= [0-9]+\n");
  CHECK(c.accepts("1,22,333"));
  CHECK_FALSE(c.accepts("1,"));
}

TEST_CASE("regexes match what std::regex matches, on random strings") {
  // Each pattern with a string it matches, so that every one is seen matching.
  const std::vector<std::pair<std::string, std::string>> patterns = {
      {"a|bc", "bc"}, {"(ab)*c?", "ababc"}, {"[a-c]{2,3}", "cab"}, {"[^ab]+", "xy!"}, {"x\\d{1,2}y", "x12y"},
      {"(a|b)+?c", "abac"}, {"\\w+-\\s?\\W", "a_1- !"}, {"a.c", "a c"}, {"(?:ab|a)b", "ab"},
      {"[a\\-c]*", "a-c-"}, {"colou?r", "color"}, {"\\.{2}", ".."}, {"[0-9a-f]{0,2}x{1,}", "0fxx"},
      {"(a(b(c)?)?)+", "abcab"}};
  std::mt19937 rng(7);
  const std::string alphabet = "abcxy0129-. _!\nolur";
  for (const auto& [p, example] : patterns) {
    const std::regex judge(p, std::regex::ECMAScript);
    checker c("root ::= " + regex_to_gbnf(p, regex_target::text));
    std::vector<std::string> inputs{example};
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const auto len = rng() % 7;
      for (std::size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      inputs.push_back(s);
    }
    for (const auto& s : inputs) {
      INFO("pattern /" << p << "/ on \"" << s << "\"");
      CHECK(c.accepts(s) == std::regex_match(s, judge));
    }
    CHECK(std::regex_match(example, judge));
  }
}

TEST_CASE("regexes: search semantics, JSON escapes, and what is refused") {
  checker search("root ::= " + regex_to_gbnf("b+", regex_target::text, true));
  CHECK(search.accepts("abba"));
  CHECK_FALSE(search.accepts("aca"));
  checker anchored("root ::= " + regex_to_gbnf("^b+$", regex_target::text, true));
  CHECK_FALSE(anchored.accepts("abb"));
  CHECK(anchored.accepts("bb"));
  // Inside a JSON string, a quote, a backslash and a newline are written escaped.
  checker js("root ::= " + regex_to_gbnf("[\"\\\\\\n]a", regex_target::json_string));
  CHECK(js.accepts("\\\"a"));
  CHECK(js.accepts("\\\\a"));
  CHECK(js.accepts("\\na"));
  CHECK_FALSE(js.accepts("\"a"));
  CHECK_FALSE(js.accepts("\na"));
  for (const auto* bad : {"(?=a)b", "a\\1", "\\bword", "a^b", "(?i)a", "a**"}) {
    CHECK_THROWS_AS(regex_to_gbnf(bad, regex_target::text), grammar_error);
  }
}

TEST_CASE("integer and number bounds are exact on every value in a window") {
  struct bounds {
    const char* schema;
    double lo, hi;
    bool lo_strict, hi_strict, integer;
  };
  const std::vector<bounds> cases = {
      {R"({"type":"integer","minimum":-37,"maximum":215})", -37, 215, false, false, true},
      {R"({"type":"integer","exclusiveMinimum":5,"exclusiveMaximum":100})", 5, 100, true, true, true},
      {R"({"type":"integer","minimum":0,"maximum":0})", 0, 0, false, false, true},
      {R"({"type":"integer","minimum":-250,"maximum":-19})", -250, -19, false, false, true},
      {R"({"type":"integer","minimum":99})", 99, 1e9, false, false, true},
      {R"({"type":"integer","maximum":-3})", -1e9, -3, false, false, true},
      {R"({"type":"number","minimum":-2.5,"maximum":7})", -2.5, 7, false, false, false},
      {R"({"type":"number","exclusiveMinimum":0,"maximum":1})", 0, 1, true, false, false},
  };
  for (const auto& b : cases) {
    checker c(json_schema_to_gbnf(b.schema));
    for (int v = -400; v <= 400; ++v) {
      const bool in = (b.lo_strict ? v > b.lo : v >= b.lo) && (b.hi_strict ? v < b.hi : v <= b.hi);
      INFO(b.schema << " at " << v);
      CHECK(c.accepts(std::to_string(v)) == in);
      if (!b.integer) {
        // Writing a fraction is allowed only where it stays inside; never outside.
        for (const char* f : {".5", ".25"}) {
          const auto text = std::to_string(v) + f;
          const double x = std::stod(text);
          const bool inside = (b.lo_strict ? x > b.lo : x >= b.lo) && (b.hi_strict ? x < b.hi : x <= b.hi);
          if (c.accepts(text)) CHECK(inside);
        }
      } else {
        CHECK_FALSE(c.accepts(std::to_string(v) + ".5"));
      }
    }
  }
  checker frac(json_schema_to_gbnf(R"({"type":"number","minimum":0,"maximum":10})"));
  CHECK(frac.accepts("3.75"));
  CHECK_FALSE(frac.accepts("10.5"));
  CHECK_FALSE(frac.accepts("01"));
}

TEST_CASE("schemas: objects with required and optional properties, arrays, enums, refs") {
  checker c(json_schema_to_gbnf(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 4},
      "age": {"type": "integer", "minimum": 0},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "minItems": 1, "maxItems": 2},
      "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
      "when": {"type": "string", "format": "date"}
    },
    "required": ["name", "next"],
    "additionalProperties": false,
    "$defs": {}
  })"));
  CHECK(c.accepts(R"({"name": "ab", "next": null})"));
  CHECK(c.accepts(R"({"name":"ab","age":3,"tags":["a",null],"next":{"name":"","next":null}})"));
  CHECK(c.accepts("{\n  \"name\": \"\\u00e9\",\n  \"next\": null,\n  \"when\": \"2024-02-28\"\n}"));
  CHECK_FALSE(c.accepts(R"({"next": null})"));                       // name is required
  CHECK_FALSE(c.accepts(R"({"name": "abcde", "next": null})"));      // maxLength 4
  CHECK_FALSE(c.accepts(R"({"name": "a", "next": null, "x": 1})"));  // not declared
  CHECK_FALSE(c.accepts(R"({"name": "a", "tags": [], "next": null})")); // minItems 1
  CHECK_FALSE(c.accepts(R"({"name": "a", "next": null, "when": "2024-02-30"})"));
  CHECK_FALSE(c.accepts(R"({"name": "a", "next": null} )"));         // nothing after the value
  CHECK_FALSE(c.prefix_ok("{                         "));             // whitespace is bounded

  checker defs(json_schema_to_gbnf(
      R"({"$defs":{"p":{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"]}},"type":"array","items":{"$ref":"#/$defs/p"}})"));
  CHECK(defs.accepts(R"([{"x": true}, {"x": false}])"));
  CHECK_FALSE(defs.accepts(R"([{"x": 1}])"));

  checker obj(json_object_gbnf());
  CHECK(obj.accepts(R"({"a": [1, -2.5e3, "x", {"b": null}], "c": true})"));
  CHECK_FALSE(obj.accepts("[1]"));
  CHECK_FALSE(obj.accepts("{a: 1}"));

  checker choice(choice_gbnf({"yes", "no", "\"q\""}));
  CHECK(choice.accepts("no"));
  CHECK(choice.accepts("\"q\""));
  CHECK_FALSE(choice.accepts("yesno"));
}

TEST_CASE("schemas: what cannot be honoured is refused by name") {
  const std::vector<std::pair<const char*, const char*>> refused = {
      {R"({"oneOf":[{"type":"string"}]})", "'oneOf' at / is not supported"},
      {R"J({"type":"object","properties":{"a":{"type":"string","pattern":"(?=x)"}}})J", "lookahead"},
      {R"({"type":"string","format":"iri-reference"})", "'format' 'iri-reference' at / is not supported"},
      {R"({"type":"string","pattern":"^a|b$","maxLength":3})", "'pattern' (other than one character class repeated)"},
      {R"({"allOf":[{"type":"string"},{"type":"integer"}]})", "'allOf' of more than one schema"},
      {R"({"type":"string","pattern":"^[a-c]{5}$","maxLength":3})", "no string meets"},
      {R"({"type":"number","multipleOf":2})", "'multipleOf'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"object","patternProperties":{}})", "'patternProperties'"},
      {R"({"$ref":"http://x/y"})", "only #"},
      {R"({"$ref":"#/$defs/missing"})", "names nothing"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no number"},
      {R"({"type":"strin"})", "unknown type 'strin'"},
      {R"({"type":"string","frobnicate":1})", "'frobnicate' at / is not supported"},
      {R"({"type":)", "not JSON"},
  };
  for (const auto& [schema, want] : refused) {
    std::string got;
    try {
      (void)json_schema_to_gbnf(schema);
    } catch (const grammar_error& e) {
      got = e.what();
    }
    INFO(schema << " -> " << got);
    CHECK(got.find(want) != std::string::npos);
  }
}

TEST_CASE("token masks equal a brute-force check of every token, and the budget ends the output") {
  auto vocab = byte_vocabulary({"{\"", "\":", "\", \"", "true", "null", "12", "ab", "\"}", "}}", "[[", "\n  "});
  const auto gbnf = json_schema_to_gbnf(
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"integer"}},"c":{"type":"boolean"}},"required":["a","b"]})");
  compiled_grammar g(parse_gbnf(gbnf), vocab);
  std::mt19937 rng(11);
  std::vector<std::uint64_t> mask;
  for (int run = 0; run < 200; ++run) {
    const int max_tokens = 16 + static_cast<int>(rng() % 40); // 15 bytes: the shortest object
    auto s = g.start();
    std::string text;
    bool ended = false;
    for (int t = 0; t < max_tokens && !ended; ++t) {
      g.fill_mask(s, max_tokens - t, mask);
      // Brute force: the grammar accepts exactly the masked tokens (budget aside).
      std::vector<token_id> allowed;
      for (token_id id = 0; id < vocab->size(); ++id) {
        const bool in = (mask[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1;
        const auto surface = vocab->surface(id);
        if (surface.empty()) {
          CHECK(in == g.can_end(s));
        } else if (in) {
          CHECK(g.advance(s, surface) != compiled_grammar::dead);
        }
        if (in) allowed.push_back(id);
      }
      REQUIRE_FALSE(allowed.empty());
      const auto pick = allowed[rng() % allowed.size()];
      if (vocab->surface(pick).empty()) {
        ended = true;
      } else {
        text += vocab->surface(pick);
        s = g.advance(s, vocab->surface(pick));
      }
    }
    INFO("run " << run << ": " << text);
    CHECK(g.can_end(s)); // within max_tokens, the output is whole
  }
  // Without a budget, the mask allows every accepted token: compare with brute force at the start.
  g.fill_mask(g.start(), 0, mask);
  for (token_id id = 0; id + 1 < vocab->size(); ++id) {
    const bool in = (mask[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1;
    CHECK(in == (g.advance(g.start(), vocab->surface(id)) != compiled_grammar::dead));
  }
}

TEST_CASE("the budget ends a repetition: where the text may end and no more fits, only the end") {
  // Parallel tool calls' shape: a whole sentence that may go on with another.
  auto vocab = byte_vocabulary({"<a>", "</a>", "\n<a>", "12"});
  compiled_grammar g(parse_gbnf(R"(root ::= item ("\n" item)*
item ::= "<a>" [0-9]+ "</a>")"), vocab);
  std::mt19937 rng(5);
  std::vector<std::uint64_t> mask;
  for (int run = 0; run < 300; ++run) {
    const int max_tokens = 4 + static_cast<int>(rng() % 30); // "<a>", a digit, "</a>", the end
    auto s = g.start();
    std::string text;
    bool ended = false;
    for (int t = 0; t < max_tokens && !ended; ++t) {
      g.fill_mask(s, max_tokens - t, mask);
      std::vector<token_id> allowed;
      for (token_id id = 0; id < vocab->size(); ++id)
        if ((mask[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1) allowed.push_back(id);
      REQUIRE_FALSE(allowed.empty());
      // Any allowed token; or, half the time, a model that would rather go on than end.
      auto pick = allowed[rng() % allowed.size()];
      if (rng() % 2)
        for (const auto id : allowed)
          if (!vocab->surface(id).empty()) {
            pick = id;
            break;
          }
      if (vocab->surface(pick).empty()) {
        ended = true;
      } else {
        text += vocab->surface(pick);
        s = g.advance(s, vocab->surface(pick));
      }
    }
    INFO("run " << run << ", max_tokens " << max_tokens << ": " << text);
    CHECK(ended); // an end token within max_tokens: "stop", not "length"
    CHECK(g.can_end(s));
  }
}

TEST_CASE("forced bytes: what every continuation starts with") {
  compiled_grammar g(parse_gbnf(R"(root ::= "{\"name\": \"" [a-z]+ "\"}")"), byte_vocabulary());
  CHECK(g.forced_bytes(g.start(), 100) == "{\"name\": \"");
  CHECK(g.forced_bytes(g.start(), 3) == "{\"n");
  const auto s = g.advance(g.start(), "{\"name\": \"x");
  CHECK(g.forced_bytes(s, 100).empty());
}

namespace {

/// A schema of n optional integer properties p0...p(n-1), p(required) required.
auto optional_properties(int n, int required = -1) -> std::string {
  std::string s = R"({"type": "object", "properties": {)";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + ("\"p" + std::to_string(i) + "\": {\"type\": \"integer\"}");
  s += "}";
  if (required >= 0) s += R"(, "required": ["p)" + std::to_string(required) + "\"]";
  return s + ", \"additionalProperties\": false}";
}

} // namespace

TEST_CASE("schemas: optional properties keep the automaton's states narrow, and mean what they say") {
  // After a value, what may follow is a comma or the end, whatever the
  // number of later properties: the state's width does not grow with them.
  const auto width_after = [](int n, const std::string& text) {
    auto g = std::make_shared<compiled_grammar>(parse_gbnf(json_schema_to_gbnf(optional_properties(n))), byte_vocabulary());
    const auto s = g->advance(g->start(), text);
    REQUIRE(s != compiled_grammar::dead);
    return g->width(s);
  };
  CHECK(width_after(10, R"({"p1": 5)") == width_after(3000, R"({"p1": 5)"));
  CHECK(width_after(10, R"({"p1": 5, "p7": 12)") == width_after(3000, R"({"p1": 5, "p7": 12)"));

  checker c(json_schema_to_gbnf(optional_properties(5, 3)));
  CHECK(c.accepts(R"({"p3": 1})"));
  CHECK(c.accepts(R"({"p0": 1, "p3": 2, "p4": 3})"));
  CHECK(c.accepts(R"({"p2": 1,"p3": 2})"));
  CHECK_FALSE(c.accepts("{}"));                   // p3 is required
  CHECK_FALSE(c.accepts(R"({"p0": 1})"));
  CHECK_FALSE(c.accepts(R"({"p4": 1, "p3": 2})")); // declared order
  CHECK_FALSE(c.accepts(R"({"p3": 1, "p3": 2})"));
  CHECK_FALSE(c.accepts(R"({"p3": 1,})"));
  checker none(json_schema_to_gbnf(optional_properties(3)));
  CHECK(none.accepts("{}"));
  CHECK(none.accepts(R"({"p2": 0})"));
  CHECK(none.accepts(R"({"p0": 0, "p2": 0})"));
  CHECK_FALSE(none.accepts(R"({, "p2": 0})"));
}

TEST_CASE("a grammar too costly to run is refused by prepare_grammar; a large linear one is prepared") {
  auto cache = grammar_cache(byte_vocabulary());
  // 5,000 optional properties: prepared, and the cache hands out the same one.
  const auto big = json_schema_to_gbnf(optional_properties(5000));
  const auto g = prepare_grammar(cache, big);
  CHECK(g == cache.get(big));
  // 70,000 alternatives open at the start: past the parse stacks a state may hold.
  std::string wide = "root ::= ";
  for (int i = 0; i < 70000; ++i) wide += (i ? " | \"x" : "\"x") + std::to_string(i) + "\"";
  try {
    (void)prepare_grammar(cache, wide);
    FAIL("a grammar past the limits was prepared");
  } catch (const grammar_error& e) {
    CHECK(std::string(e.what()).find("too costly to run") != std::string::npos);
  }
}

TEST_CASE("GBNF: a chain as long as the text parses, in any order of its rules") {
  // 60,000 nullable rules, each naming the next: no recursion as deep as the
  // chain (it overflowed the stack), no pass per link.
  std::string chain = "root ::= r0 \"!\"\n";
  for (int i = 0; i < 60000; ++i) chain += "r" + std::to_string(i) + " ::= \"a\" | r" + std::to_string(i + 1) + "\n";
  chain += "r60000 ::= \"\"\n";
  const auto g = parse_gbnf(chain);
  CHECK(g.min_length[static_cast<std::size_t>(g.root)] == 1);
  checker c(chain);
  CHECK(c.accepts("!"));
  CHECK(c.accepts("a!"));
  CHECK_FALSE(c.accepts("aa!"));
  CHECK(error_of("root ::= a\na ::= b | \"x\"\nb ::= \"\" a") == "rule 'a' is left-recursive");
  CHECK(error_of("root ::= \"y\" | a\na ::= \"x\" a") == "rule 'a' never ends: every alternative refers back to itself");
}

TEST_CASE("schemas: a character class repeated meets lengths and allOf (Claude Code's tools)") {
  // SendMessage's "to": one line, at most 300 characters, as two patterns in allOf.
  checker to(json_schema_to_gbnf(
      R"({"type":"string","allOf":[{"pattern":"^[^\\n\\r]*$"},{"pattern":"^[\\s\\S]{0,300}$"}]})"));
  CHECK(to.accepts(R"("main")"));
  CHECK(to.accepts("\"" + std::string(300, 'x') + "\""));
  CHECK_FALSE(to.accepts("\"" + std::string(301, 'x') + "\""));
  CHECK_FALSE(to.accepts(R"("a\nb")")); // (JSON's escape of a newline)
  checker digits(json_schema_to_gbnf(R"({"type":"string","pattern":"^[0-9]+$","minLength":2,"maxLength":4})"));
  CHECK(digits.accepts(R"("12")"));
  CHECK(digits.accepts(R"("1234")"));
  CHECK_FALSE(digits.accepts(R"("1")"));
  CHECK_FALSE(digits.accepts(R"("12a")"));
  CHECK_FALSE(digits.accepts(R"("12345")"));
}

TEST_CASE("schemas: a maxLength past 10,000 is kept, in blocks") {
  checker c(json_schema_to_gbnf(R"({"type":"string","maxLength":25003})"));
  CHECK(c.accepts(R"("")"));
  CHECK(c.accepts("\"" + std::string(9999, 'a') + "\""));
  CHECK(c.accepts("\"" + std::string(10000, 'a') + "\""));
  CHECK(c.accepts("\"" + std::string(20001, 'a') + "\""));
  CHECK(c.accepts("\"" + std::string(25003, 'a') + "\""));
  CHECK_FALSE(c.accepts("\"" + std::string(25004, 'a') + "\""));
  checker min(json_schema_to_gbnf(R"({"type":"string","minLength":3,"maxLength":12000})"));
  CHECK_FALSE(min.accepts(R"("ab")"));
  CHECK(min.accepts("\"" + std::string(12000, 'a') + "\""));
  CHECK_FALSE(min.accepts("\"" + std::string(12001, 'a') + "\""));
}

TEST_CASE("schemas: propertyNames shape a map's keys; format uri") {
  checker keys(json_schema_to_gbnf(
      R"({"type":"object","propertyNames":{"type":"string","pattern":"^[a-z]+$"},"additionalProperties":{"type":"integer"}})"));
  CHECK(keys.accepts(R"({"ab":1,"c":2})"));
  CHECK_FALSE(keys.accepts(R"({"Ab":1})"));
  checker uri(json_schema_to_gbnf(R"({"type":"string","format":"uri"})"));
  CHECK(uri.accepts(R"("https://example.com/a?b=c#d")"));
  CHECK(uri.accepts(R"("mailto:x@y.org")"));
  CHECK_FALSE(uri.accepts(R"("no scheme here")"));
  CHECK_FALSE(uri.accepts(R"("1http://x")"));
}
