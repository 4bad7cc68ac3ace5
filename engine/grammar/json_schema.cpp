// Each subschema becomes a rule named after its place in the schema; objects
// write their declared properties in order, with the optional ones each
// free to be left out (two rules per property: "something already written"
// and "nothing yet", which places the commas).

#include "engine/grammar/json_schema.hpp"

#include "base/json_text.hpp"
#include "engine/grammar/grammar.hpp"
#include "engine/grammar/regex.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace troupe::grammar {
namespace {

namespace dom = simdjson::dom;

constexpr int max_digits = 16; // integers and fractions: exact in a double, and they end

auto json_quote(std::string_view s) -> std::string {
  std::string out;
  json_text::append_string(out, s);
  return out;
}

auto digits_of(std::int64_t v) -> int { return static_cast<int>(std::to_string(v).size()); }

auto pow10(int d) -> std::int64_t {
  std::int64_t p = 1;
  for (int i = 0; i < d; ++i) p *= 10;
  return p;
}

/// Numbers of the same length from lo to hi (decimal strings, lo <= hi).
auto same_length(const std::string& lo, const std::string& hi) -> std::string {
  const auto n = lo.size();
  if (lo == hi) return gbnf_literal(lo);
  if (n == 1) return std::string("[") + lo[0] + "-" + hi[0] + "]";
  if (lo[0] == hi[0]) return gbnf_literal(lo.substr(0, 1)) + " (" + same_length(lo.substr(1), hi.substr(1)) + ")";
  const auto rest = static_cast<int>(n - 1);
  const bool lo_zeros = lo.find_first_not_of('0', 1) == std::string::npos;
  const bool hi_nines = hi.find_first_not_of('9', 1) == std::string::npos;
  std::vector<std::string> alts;
  char mid_lo = static_cast<char>(lo[0] + 1), mid_hi = static_cast<char>(hi[0] - 1);
  if (lo_zeros) mid_lo = lo[0];
  else alts.push_back(gbnf_literal(lo.substr(0, 1)) + " (" + same_length(lo.substr(1), std::string(n - 1, '9')) + ")");
  if (hi_nines) mid_hi = hi[0];
  if (mid_lo <= mid_hi) alts.push_back(std::string("[") + mid_lo + "-" + mid_hi + "] [0-9]{" + std::to_string(rest) + "}");
  if (!hi_nines) alts.push_back(gbnf_literal(hi.substr(0, 1)) + " (" + same_length(std::string(n - 1, '0'), hi.substr(1)) + ")");
  std::string out;
  for (const auto& a : alts) out += std::string(out.empty() ? "" : " | ") + a;
  return out;
}

/// Non-negative integers in [lo, hi] (hi empty: no bound, up to max_digits digits).
auto natural_range(std::int64_t lo, std::optional<std::int64_t> hi) -> std::string {
  std::vector<std::string> alts;
  const int top = hi ? digits_of(*hi) : max_digits;
  for (int d = digits_of(lo); d <= top; ++d) {
    const auto a = std::max(lo, d == 1 ? 0 : pow10(d - 1));
    if (!hi && d > digits_of(lo)) { // every number of d or more digits
      alts.push_back("[1-9] [0-9]{" + std::to_string(d - 1) + "," + std::to_string(max_digits - 1) + "}");
      break;
    }
    const auto b = hi ? std::min(*hi, pow10(d) - 1) : pow10(d) - 1;
    if (a <= b) alts.push_back(same_length(std::to_string(a), std::to_string(b)));
  }
  std::string out;
  for (const auto& a : alts) out += std::string(out.empty() ? "" : " | ") + a;
  return out;
}

/// Integers in [lo, hi], either side open; "" when there are none.
auto integer_range(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) -> std::string {
  const auto cap = pow10(max_digits) - 1;
  if (lo) lo = std::max(*lo, -cap);
  if (hi) hi = std::min(*hi, cap);
  if (lo && hi && *lo > *hi) return "";
  std::vector<std::string> alts;
  if (!hi || *hi >= 0) alts.push_back(natural_range(lo ? std::max<std::int64_t>(*lo, 0) : 0, hi));
  if (!lo || *lo < 0) {
    const std::int64_t m = hi ? std::max<std::int64_t>(1, -*hi) : 1;
    const std::optional<std::int64_t> top = lo ? std::optional<std::int64_t>(-*lo) : std::nullopt;
    if (!top || m <= *top) alts.push_back("\"-\" (" + natural_range(m, top) + ")");
  }
  std::string out;
  for (const auto& a : alts) out += std::string(out.empty() ? "" : " | ") + "(" + a + ")";
  return out;
}

auto format_rule(std::string_view f) -> std::string {
  static const std::string date =
      "[1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
      "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))";
  static const std::string time = "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
                                  "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
  static const std::string label = "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,20} [a-zA-Z0-9])?";
  static const std::string octet = "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9])";
  if (f == "date") return date;
  if (f == "time") return time;
  if (f == "date-time") return date + " \"T\" " + time;
  if (f == "uuid") return "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}";
  if (f == "email")
    return "[a-zA-Z0-9_+-]{1,20} (\".\" [a-zA-Z0-9_+-]{1,20}){0,2} \"@\" " + label + " (\".\" " + label +
           "){0,2} \".\" [a-zA-Z]{2,10}";
  if (f == "ipv4") return octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet;
  if (f == "ipv6") return "[0-9a-f]{1,4} (\":\" [0-9a-f]{1,4}){7}";
  if (f == "hostname") return label + " (\".\" " + label + "){0,3}";
  // A URI: a scheme, ':', then characters a URI may hold (RFC 3986's, or
  // percent escapes); a reference may leave the scheme out.
  static const std::string uri_chars = "([a-zA-Z0-9._~:/?#@!$&'()*+,;=-] | \"%\" [0-9a-fA-F]{2}){0,2000}";
  if (f == "uri") return "[a-zA-Z] [a-zA-Z0-9+.-]{0,31} \":\" " + uri_chars;
  if (f == "uri-reference") return uri_chars;
  if (f == "duration") {
    const std::string t = "([0-9]{1,2} \"H\" ([0-9]{1,2} \"M\")? ([0-9]{1,2} \"S\")? | [0-9]{1,2} \"M\" ([0-9]{1,2} \"S\")? | "
                          "[0-9]{1,2} \"S\")";
    return "\"P\" ([0-9]{1,4} \"D\" (\"T\" " + t + ")? | \"T\" " + t + " | [0-9]{1,3} \"W\")";
  }
  return "";
}

} // namespace

struct json_schema_grammar::impl {
  json_schema_grammar& g;
  dom::element root;
  std::string prefix;
  std::map<std::string, std::string> refs; // "#/$defs/x" -> rule

  static auto is_annotation(std::string_view k) -> bool {
    static const std::set<std::string_view> keys = {"title",   "description", "default",    "examples",  "$schema",
                                                    "$id",     "$comment",    "deprecated", "readOnly",  "writeOnly",
                                                    "$defs",   "definitions", "$anchor",    "contentMediaType",
                                                    "contentEncoding"};
    return keys.contains(k);
  }

  [[noreturn]] static void unsupported(std::string_view keyword, const std::string& path) {
    throw grammar_error("'" + std::string(keyword) + "' at " + (path.empty() ? "/" : path) + " is not supported");
  }
  [[noreturn]] static void bad(const std::string& path, const std::string& what) {
    throw grammar_error((path.empty() ? std::string("/") : path) + ": " + what);
  }

  auto fresh(const std::string& hint) -> std::string {
    std::string clean;
    for (const char c : hint)
      clean += ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c : '-';
    if (clean.size() > 40) clean.resize(40);
    return prefix + "-" + clean + "-" + std::to_string(g.next_++);
  }

  auto compile(dom::element s, const std::string& path) -> std::string {
    const auto name = fresh(path.empty() ? "root" : path);
    g.add_rule(name, body(s, path, name));
    return name;
  }

  static auto number_of(dom::element v, const std::string& path, std::string_view key) -> double {
    double d = 0;
    if (v.is_int64()) d = static_cast<double>(v.get_int64().value());
    else if (v.is_uint64()) d = static_cast<double>(v.get_uint64().value());
    else if (v.is_double()) d = v.get_double().value();
    else bad(path, "'" + std::string(key) + "' must be a number");
    return d;
  }
  static auto count_of(dom::element v, const std::string& path, std::string_view key,
                       std::int64_t most = 10000) -> std::int64_t {
    if (!v.is_int64() || v.get_int64().value() < 0 || v.get_int64().value() > most)
      bad(path, "'" + std::string(key) + "' must be an integer in [0, " + std::to_string(most) + "]");
    return v.get_int64().value();
  }

  /// A string schema's characters and length, as one char_run: its pattern
  /// when that is one character set repeated (none: every character), within
  /// minLength and maxLength (up to 100,000,000: GBNF then repeats blocks of
  /// 10,000). None when the pattern is another regex.
  static auto string_run(std::map<std::string_view, dom::element>& kw, const std::string& path)
      -> std::optional<char_run> {
    char_run run = length_run(kw.contains("minLength") ? count_of(kw["minLength"], path, "minLength") : 0,
                              kw.contains("maxLength") ? count_of(kw["maxLength"], path, "maxLength", 100000000) : -1);
    if (!kw.contains("pattern")) return run;
    if (!kw["pattern"].is_string()) bad(path, "'pattern' must be a string");
    const auto p = pattern_run(kw["pattern"].get_string().value());
    if (!p) return std::nullopt;
    return intersect(run, *p);
  }

  /// allOf's schemas when each is a string of one character set (a type
  /// "string", a pattern that is one, minLength, maxLength), with the
  /// schema's own such keywords: their intersection. None otherwise.
  auto all_of_strings(std::map<std::string_view, dom::element>& kw, const std::string& path) -> std::optional<std::string> {
    static const std::set<std::string_view> string_keys = {"type", "pattern", "minLength", "maxLength"};
    const auto run_of = [&](std::map<std::string_view, dom::element>& m, const std::string& at) -> std::optional<char_run> {
      for (const auto& [k, v] : m)
        if (k != "allOf" && !is_annotation(k) && !string_keys.contains(k)) return std::nullopt;
      if (m.contains("type") && !(m["type"].is_string() && m["type"].get_string().value() == "string")) return std::nullopt;
      return string_run(m, at);
    };
    auto run = run_of(kw, path);
    std::size_t i = 0;
    for (auto member : kw["allOf"].get_array()) {
      const auto at = path + "/allOf/" + std::to_string(i++);
      if (!member.is_object()) return std::nullopt;
      std::map<std::string_view, dom::element> m;
      for (auto [k, v] : member.get_object()) m.emplace(k, v);
      const auto r = run_of(m, at);
      if (!run || !r) return std::nullopt;
      run = intersect(*run, *r);
    }
    return "\"\\\"\" " + run_to_gbnf(*run, regex_target::json_string) + " \"\\\"\"";
  }

  auto literal_of(dom::element v) -> std::string { return gbnf_literal(simdjson::minify(v)); }

  auto body(dom::element s, const std::string& path, const std::string& self) -> std::string {
    if (s.is_bool()) {
      if (s.get_bool().value()) return g.any_value();
      bad(path, "the schema false matches nothing");
    }
    if (!s.is_object()) bad(path, "a schema must be an object or a boolean");
    const auto obj = s.get_object().value();
    std::map<std::string_view, dom::element> kw;
    for (auto [k, v] : obj) kw.emplace(k, v);
    auto has = [&](std::string_view k) { return kw.contains(k); };

    if (has("$ref")) {
      for (const auto& [k, v] : kw)
        if (k != "$ref" && !is_annotation(k)) unsupported(std::string(k) + "' beside '$ref", path);
      if (!kw["$ref"].is_string()) bad(path, "'$ref' must be a string");
      return ref(std::string(kw["$ref"].get_string().value()), path);
    }
    for (const auto k : {"oneOf", "not", "if", "then", "else", "dependentSchemas", "dependentRequired",
                         "patternProperties", "unevaluatedProperties", "unevaluatedItems",
                         "minProperties", "maxProperties", "contains", "minContains", "maxContains", "multipleOf",
                         "$dynamicRef", "$recursiveRef"})
      if (has(k)) unsupported(k, path);
    if (has("uniqueItems") && kw["uniqueItems"].is_bool() && kw["uniqueItems"].get_bool().value()) {
      const bool trivial = has("maxItems") && kw["maxItems"].is_int64() && kw["maxItems"].get_int64().value() <= 1;
      if (!trivial) unsupported("uniqueItems", path);
    }
    if (has("allOf")) {
      const auto a = kw["allOf"];
      if (a.is_array() && a.get_array().size() > 1)
        if (auto strings = all_of_strings(kw, path)) return *strings;
      if (!a.is_array() || a.get_array().size() != 1) unsupported("allOf' of more than one schema", path);
      for (const auto& [k, v] : kw)
        if (k != "allOf" && !is_annotation(k)) unsupported(std::string(k) + "' beside 'allOf", path);
      return compile(a.get_array().at(0).value(), path + "/allOf/0");
    }
    if (has("const")) return literal_of(kw["const"]);
    if (has("enum")) {
      if (!kw["enum"].is_array() || kw["enum"].get_array().size() == 0) bad(path, "'enum' must be a non-empty array");
      std::string out;
      for (auto v : kw["enum"].get_array()) out += std::string(out.empty() ? "" : " | ") + literal_of(v);
      return out;
    }
    if (has("anyOf")) {
      const auto a = kw["anyOf"];
      if (!a.is_array() || a.get_array().size() == 0) bad(path, "'anyOf' must be a non-empty array");
      std::string out;
      std::size_t i = 0;
      for (auto v : a.get_array()) out += std::string(out.empty() ? "" : " | ") + compile(v, path + "/anyOf/" + std::to_string(i++));
      return out;
    }
    std::vector<std::string> types;
    if (has("type")) {
      const auto t = kw["type"];
      if (t.is_string()) {
        types.emplace_back(t.get_string().value());
      } else if (t.is_array()) {
        for (auto v : t.get_array()) {
          if (!v.is_string()) bad(path, "'type' must be a string or an array of strings");
          types.emplace_back(v.get_string().value());
        }
      } else {
        bad(path, "'type' must be a string or an array of strings");
      }
    } else if (has("properties") || has("required") || has("additionalProperties")) {
      types = {"object"};
    } else if (has("items") || has("prefixItems") || has("minItems") || has("maxItems")) {
      types = {"array"};
    } else if (has("pattern") || has("format") || has("minLength") || has("maxLength")) {
      types = {"string"};
    } else if (has("minimum") || has("maximum") || has("exclusiveMinimum") || has("exclusiveMaximum")) {
      types = {"number"};
    }
    for (const auto& [k, v] : kw) {
      static const std::set<std::string_view> known = {
          "type",     "properties", "required",  "additionalProperties", "items",   "prefixItems",
          "minItems", "maxItems",   "pattern",   "format",               "minLength", "maxLength",
          "minimum",  "maximum",    "exclusiveMinimum", "exclusiveMaximum", "uniqueItems", "nullable", "propertyNames"};
      if (!known.contains(k) && !is_annotation(k)) unsupported(k, path);
    }
    if (types.empty()) return g.any_value();
    std::string out;
    for (const auto& t : types) out += std::string(out.empty() ? "" : " | ") + "(" + typed(t, kw, path, self) + ")";
    return out;
  }

  auto ref(const std::string& target, const std::string& path) -> std::string {
    if (auto it = refs.find(target); it != refs.end()) return it->second;
    dom::element at;
    if (target == "#") {
      at = root;
    } else {
      std::string_view t = target;
      std::string_view section;
      if (t.starts_with("#/$defs/")) section = "$defs";
      else if (t.starts_with("#/definitions/")) section = "definitions";
      else bad(path, "'$ref' " + target + ": only #, #/$defs/NAME and #/definitions/NAME are supported");
      const auto name = t.substr(section.size() + 3);
      auto defs = root[section];
      if (defs.error() || !defs.value().is_object()) bad(path, "'$ref' " + target + " names nothing in the schema");
      auto found = defs.value()[name];
      if (found.error()) bad(path, "'$ref' " + target + " names nothing in the schema");
      at = found.value();
    }
    const auto rule = fresh(target);
    refs.emplace(target, rule);
    g.add_rule(rule, "\"\""); // reserved: recursion refers to it before it is written
    const auto text = body(at, target.substr(1), rule);
    for (auto& [n, b] : g.rules_)
      if (n == rule) b = text;
    return rule;
  }

  auto typed(const std::string& t, std::map<std::string_view, dom::element>& kw, const std::string& path,
             const std::string& self) -> std::string {
    auto has = [&](std::string_view k) { return kw.contains(k); };
    if (t == "null") return "\"null\"";
    if (t == "boolean") return "\"true\" | \"false\"";
    if (t == "string") return string_body(kw, path);
    if (t == "integer" || t == "number") return number_body(t == "integer", kw, path);
    if (t == "array") return array_body(kw, path);
    if (t == "object") return object_body(kw, path, self);
    (void)has;
    bad(path, "unknown type '" + t + "'");
  }

  auto string_body(std::map<std::string_view, dom::element>& kw, const std::string& path) -> std::string {
    const bool has_len = kw.contains("minLength") || kw.contains("maxLength");
    if (kw.contains("format")) {
      if (!kw["format"].is_string()) bad(path, "'format' must be a string");
      const auto f = std::string(kw["format"].get_string().value());
      const auto r = format_rule(f);
      if (r.empty()) unsupported("format' '" + f, path);
      if (kw.contains("pattern") || has_len) unsupported("format' with 'pattern' or a length", path);
      return "\"\\\"\" " + r + " \"\\\"\"";
    }
    if (kw.contains("pattern") && !has_len) {
      if (!kw["pattern"].is_string()) bad(path, "'pattern' must be a string");
      return "\"\\\"\" " + regex_to_gbnf(kw["pattern"].get_string().value(), regex_target::json_string, true) + " \"\\\"\"";
    }
    const auto run = string_run(kw, path);
    if (!run) unsupported("pattern' (other than one character class repeated) with 'minLength' or 'maxLength", path);
    if (run->hi >= 0 && run->hi < run->lo)
      bad(path, "'maxLength' is below 'minLength' (or the pattern's length): no string meets them");
    try {
      if (!kw.contains("pattern")) return "\"\\\"\" " + repeat_gbnf("json-char", run->lo, run->hi) + " \"\\\"\"";
      return "\"\\\"\" " + run_to_gbnf(*run, regex_target::json_string) + " \"\\\"\"";
    } catch (const grammar_error& e) {
      bad(path, e.what());
    }
  }

  auto number_body(bool integer, std::map<std::string_view, dom::element>& kw, const std::string& path) -> std::string {
    std::optional<double> lo, hi;
    bool lo_strict = false, hi_strict = false;
    if (kw.contains("minimum")) lo = number_of(kw["minimum"], path, "minimum");
    if (kw.contains("maximum")) hi = number_of(kw["maximum"], path, "maximum");
    if (kw.contains("exclusiveMinimum")) {
      const auto v = number_of(kw["exclusiveMinimum"], path, "exclusiveMinimum");
      if (!lo || v >= *lo) lo = v, lo_strict = true;
    }
    if (kw.contains("exclusiveMaximum")) {
      const auto v = number_of(kw["exclusiveMaximum"], path, "exclusiveMaximum");
      if (!hi || v <= *hi) hi = v, hi_strict = true;
    }
    if (!lo && !hi) return integer ? "json-int" : "json-number";
    const double cap = 1e16;
    auto clamp = [&](double v) { return std::max(-cap, std::min(cap, v)); };
    // Integer values n with lo <= n <= hi (strict where exclusive).
    std::optional<std::int64_t> ilo, ihi;
    if (lo) ilo = static_cast<std::int64_t>(lo_strict ? std::floor(clamp(*lo)) + 1 : std::ceil(clamp(*lo)));
    if (hi) ihi = static_cast<std::int64_t>(hi_strict ? std::ceil(clamp(*hi)) - 1 : std::floor(clamp(*hi)));
    std::vector<std::string> alts;
    if (auto r = integer_range(ilo, ihi); !r.empty()) alts.push_back(r);
    if (!integer) {
      // k.f with f ending in a non-zero digit lies strictly in (k, k+1):
      // allowed where k >= lo and k + 1 <= hi; -k.f in (-k-1, -k) where
      // -k-1 >= lo and -k <= hi.
      const std::string frac = " \".\" [0-9]{0," + std::to_string(max_digits - 2) + "} [1-9]";
      std::optional<std::int64_t> plo = lo ? std::optional<std::int64_t>(std::max<std::int64_t>(0, static_cast<std::int64_t>(std::ceil(clamp(*lo))))) : std::optional<std::int64_t>(0);
      std::optional<std::int64_t> phi;
      if (hi) phi = static_cast<std::int64_t>(std::floor(clamp(*hi))) - 1;
      if (!phi || *phi >= *plo)
        if (auto r = integer_range(plo, phi); !r.empty()) alts.push_back("(" + r + ")" + frac);
      std::optional<std::int64_t> nlo = std::max<std::int64_t>(1, hi ? static_cast<std::int64_t>(std::ceil(-clamp(*hi))) : 1);
      std::optional<std::int64_t> nhi;
      if (lo) nhi = static_cast<std::int64_t>(std::floor(-clamp(*lo) - 1));
      if (!nhi || *nhi >= *nlo)
        if (auto r = integer_range(nlo, nhi); !r.empty()) alts.push_back("\"-\" (" + r + ")" + frac);
    }
    if (alts.empty()) bad(path, "no number the grammar can write lies between the bounds");
    std::string out;
    for (const auto& a : alts) out += std::string(out.empty() ? "" : " | ") + "(" + a + ")";
    return out;
  }

  auto array_body(std::map<std::string_view, dom::element>& kw, const std::string& path) -> std::string {
    const std::int64_t min = kw.contains("minItems") ? count_of(kw["minItems"], path, "minItems") : 0;
    std::optional<std::int64_t> max;
    if (kw.contains("maxItems")) max = count_of(kw["maxItems"], path, "maxItems");
    if (max && *max < min) bad(path, "'maxItems' is below 'minItems'");
    std::optional<std::string> item; // empty: no more items allowed
    if (!kw.contains("items")) item = g.any_value();
    else if (kw["items"].is_bool()) {
      if (kw["items"].get_bool().value()) item = g.any_value();
    } else {
      item = compile(kw["items"], path + "/items");
    }
    const std::string sep = " ws \",\" ws ";
    if (kw.contains("prefixItems")) {
      if (!kw["prefixItems"].is_array()) bad(path, "'prefixItems' must be an array");
      std::vector<std::string> parts;
      std::size_t i = 0;
      for (auto v : kw["prefixItems"].get_array()) parts.push_back(compile(v, path + "/prefixItems/" + std::to_string(i++)));
      const auto k = static_cast<std::int64_t>(parts.size());
      const auto n = std::max(k, min);
      if (max && n > *max) unsupported("prefixItems' longer than 'maxItems", path);
      if (n > k && !item) bad(path, "'minItems' asks for more items than 'prefixItems' and 'items' allow");
      for (auto j = k; j < n; ++j) parts.push_back(*item);
      std::string out = "\"[\" ws ";
      for (std::size_t j = 0; j < parts.size(); ++j) out += (j ? sep : "") + parts[j];
      return out + " ws \"]\"";
    }
    if (!item || (max && *max == 0)) {
      if (min > 0) bad(path, "'minItems' asks for items that 'items' forbids");
      return "\"[\" ws \"]\"";
    }
    const auto more_lo = std::max<std::int64_t>(min - 1, 0);
    const auto more = max ? "{" + std::to_string(more_lo) + "," + std::to_string(*max - 1) + "}"
                          : more_lo ? "{" + std::to_string(more_lo) + ",}" : "*";
    const auto list = *item + " (" + sep + *item + ")" + more;
    return "\"[\" ws " + (min == 0 ? "(" + list + ")?" : list) + " ws \"]\"";
  }

  auto object_body(std::map<std::string_view, dom::element>& kw, const std::string& path, const std::string& self)
      -> std::string {
    std::vector<std::pair<std::string, std::string>> items; // key literal, value rule
    std::vector<bool> req;
    std::set<std::string> required;
    if (kw.contains("required")) {
      if (!kw["required"].is_array()) bad(path, "'required' must be an array of strings");
      for (auto v : kw["required"].get_array()) {
        if (!v.is_string()) bad(path, "'required' must be an array of strings");
        required.emplace(v.get_string().value());
      }
    }
    std::set<std::string> declared;
    if (kw.contains("properties")) {
      if (!kw["properties"].is_object()) bad(path, "'properties' must be an object");
      for (auto [k, v] : kw["properties"].get_object()) {
        const std::string key(k);
        declared.insert(key);
        items.emplace_back(gbnf_literal(json_quote(key)), compile(v, path + "/properties/" + key));
        req.push_back(required.contains(key));
      }
    }
    for (const auto& key : required)
      if (!declared.contains(key)) {
        items.emplace_back(gbnf_literal(json_quote(key)), g.any_value());
        req.push_back(true);
      }
    if (items.empty()) {
      if (kw.contains("additionalProperties") && kw["additionalProperties"].is_bool() &&
          !kw["additionalProperties"].get_bool().value())
        return "\"{\" ws \"}\"";
      std::string value = g.any_value();
      if (kw.contains("additionalProperties") && !kw["additionalProperties"].is_bool())
        value = compile(kw["additionalProperties"], path + "/additionalProperties");
      // propertyNames: the keys' schema (a string's).
      const auto key = kw.contains("propertyNames") ? compile(kw["propertyNames"], path + "/propertyNames") : "json-string";
      const auto pair = key + " ws \":\" ws " + value;
      return "\"{\" ws (" + pair + " (ws \",\" ws " + pair + ")*)? ws \"}\"";
    }
    // Linear in the properties, and so are the matcher's states: pick-i
    // chooses the next key (property i or, when i is optional, a later one),
    // rest-i follows a value (a comma and the next pick, or the end where no
    // required property is left). A value's end then has O(1) continuations,
    // where nesting the choice after it would keep every later key open.
    const auto n = items.size();
    auto kv = [&](std::size_t i) { return items[i].first + " ws \":\" ws " + items[i].second; };
    auto pick = [&](std::size_t i) { return self + "-p" + std::to_string(i); };
    auto rest = [&](std::size_t i) { return self + "-r" + std::to_string(i); };
    bool required_after = false; // a required property at index >= i
    for (std::size_t i = n; i-- > 0;) {
      g.add_rule(pick(i), kv(i) + (i + 1 < n ? " " + rest(i + 1) : "") +
                              (!req[i] && i + 1 < n ? " | " + pick(i + 1) : ""));
      required_after = required_after || req[i];
      if (i > 0) g.add_rule(rest(i), "ws \",\" ws " + pick(i) + (required_after ? "" : " | \"\""));
    }
    const std::string open = "\"{\" ws " + pick(0) + " ws \"}\"";
    return required_after ? open : "(" + open + " | \"{\" ws \"}\")";
  }
};

json_schema_grammar::json_schema_grammar() {
  add_rule("ws", "| \" \" | \"\\n\" [ \\t]{0,20}");
  add_rule("json-char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})");
  add_rule("json-string", "\"\\\"\" json-char* \"\\\"\"");
  add_rule("json-int", "\"-\"? (\"0\" | [1-9] [0-9]{0,15})");
  add_rule("json-number", "json-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?");
}

void json_schema_grammar::add_rule(const std::string& name, const std::string& body) {
  rules_.emplace_back(name, body);
}

auto json_schema_grammar::any_value() -> std::string {
  for (const auto& [n, b] : rules_)
    if (n == "json-value") return n;
  add_rule("json-value", "json-object | json-array | json-string | json-number | \"true\" | \"false\" | \"null\"");
  add_rule("json-array", "\"[\" ws (json-value (ws \",\" ws json-value)*)? ws \"]\"");
  add_rule("json-object", "\"{\" ws (json-string ws \":\" ws json-value (ws \",\" ws json-string ws \":\" ws json-value)*)? ws \"}\"");
  return "json-value";
}

auto json_schema_grammar::any_object() -> std::string {
  any_value();
  return "json-object";
}

auto json_schema_grammar::add(std::string_view schema, std::string_view name) -> std::string {
  dom::parser parser;
  const simdjson::padded_string text(schema);
  auto doc = parser.parse(text);
  if (doc.error()) throw grammar_error("the schema is not JSON: " + std::string(simdjson::error_message(doc.error())));
  impl c{*this, doc.value(), std::string(name), {}};
  const auto rule = std::string(name);
  add_rule(rule, "\"\"");
  const auto text_body = c.body(doc.value(), "", rule);
  for (auto& [n, b] : rules_)
    if (n == rule) b = text_body;
  return rule;
}

auto json_schema_grammar::text() const -> std::string {
  std::string out;
  for (const auto& [n, b] : rules_) out += n + " ::= " + b + "\n";
  return out;
}

auto json_schema_to_gbnf(std::string_view schema) -> std::string {
  json_schema_grammar g;
  g.add(schema, "root");
  return g.text();
}

auto json_object_gbnf() -> std::string {
  json_schema_grammar g;
  g.add_rule("root", g.any_object());
  return g.text();
}

auto choice_gbnf(const std::vector<std::string>& choices) -> std::string {
  if (choices.empty()) throw grammar_error("no choices given");
  std::string body;
  for (const auto& c : choices) body += (body.empty() ? "" : " | ") + gbnf_literal(c);
  return "root ::= " + body + "\n";
}

} // namespace troupe::grammar
