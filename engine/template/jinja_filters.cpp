// jinja2 3.1's filters (filters.py) and tests (tests.py) as chat templates
// use them, with transformers' tojson (json.dumps, ensure_ascii off, no HTML
// escaping). What is not here is refused when the template is parsed.

#include "engine/template/jinja_builtins.hpp"
#include "engine/template/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>

namespace troupe::jinja {
namespace {

[[noreturn]] void fail(const std::string& what) { throw render_error(what); }

auto arg(const call_args& a, std::size_t i, std::string_view name, value fallback = {}) -> value {
  const auto* v = a.get(i, name);
  return v != nullptr ? *v : fallback;
}

auto truthy_arg(const call_args& a, std::size_t i, std::string_view name, bool fallback) -> bool {
  const auto* v = a.get(i, name);
  return v != nullptr ? v->truthy() : fallback;
}

/// jinja2's make_attrgetter: "a.b" and "0" index into the item.
auto attribute(const value& item, const value& path) -> value {
  if (!path.is_string()) return get_item(item, path);
  value v = item;
  std::string_view rest = path.str();
  while (true) {
    const auto dot = rest.find('.');
    const auto part = rest.substr(0, dot);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = digits ? get_item(v, value(static_cast<std::int64_t>(std::atoll(std::string(part).c_str()))))
               : get_item(v, value(std::string(part)));
    if (dot == std::string_view::npos) return v;
    rest.remove_prefix(dot + 1);
  }
}

/// The key sort and unique compare by: case folded unless case_sensitive.
auto sort_key(const value& v, bool case_sensitive) -> value {
  return !case_sensitive && v.is_string() ? value(text::lower(v.str())) : v;
}

auto less(const value& a, const value& b) -> bool { return compare_op("<", a, b); }

/// A generator (read lazily, once) of what `produce` makes.
auto generator(std::function<array()> produce) -> value {
  return value(sequence{sequence::kind::generator, std::move(produce), "generator"});
}

/// select/reject/selectattr/rejectattr: args from `first` name the test and its arguments.
auto select_now(const value& seq, const call_args& a, bool by_attr, bool keep) -> array;

auto select(const value& seq, const call_args& a, bool by_attr, bool keep) -> value {
  return generator([seq, a, by_attr, keep] { return select_now(seq, a, by_attr, keep); });
}

auto select_now(const value& seq, const call_args& a, bool by_attr, bool keep) -> array {
  std::size_t first = 0;
  value attr;
  if (by_attr) {
    if (a.positional.empty()) fail("selectattr/rejectattr need an attribute");
    attr = a.positional[0];
    first = 1;
  }
  std::string test;
  call_args test_args;
  if (a.positional.size() > first) {
    if (!a.positional[first].is_string()) fail("a test name must be a string");
    test = a.positional[first].str();
    if (!is_known_test(test)) fail("test \"" + test + "\" is not supported");
    test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(first) + 1, a.positional.end());
  }
  array out;
  if (!seq.truthy()) return out; // jinja2: `if value:` before iterating
  for (const auto& item : iterate(seq)) {
    const auto subject = by_attr ? attribute(item, attr) : item;
    const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return out;
}

auto do_round(const value& v, const call_args& a) -> value {
  if (!v.is_number()) fail("round() needs a number");
  const auto precision = arg(a, 0, "precision", value(0));
  const auto method = arg(a, 1, "method", value("common"));
  const double p = std::pow(10.0, static_cast<double>(std::clamp<std::int64_t>(precision.as_int(), -400, 400)));
  const double x = v.as_real() * p;
  double r = 0;
  if (method.is_string() && method.str() == "common") {
    r = std::nearbyint(x); // Python's round: half to even
  } else if (method.is_string() && method.str() == "floor") {
    r = std::floor(x);
  } else if (method.is_string() && method.str() == "ceil") {
    r = std::ceil(x);
  } else {
    fail("method must be common, ceil or floor");
  }
  if (method.str() == "common" && (v.is_int() || v.is_bool()) && precision.as_int() >= 0) return v.as_int();
  return r / p;
}

/// A number's text as Python's int()/float() read it: stripped, single
/// underscores between digits dropped; nullopt for what strtod would take
/// but Python would not (hex floats).
auto python_number_text(const std::string& text) -> std::optional<std::string> {
  const auto s = std::string(text::strip(text));
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto digit = [&](std::size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
    if (s[i] == '_' && i > 0 && digit(i - 1) && digit(i + 1)) continue;
    if (s[i] == 'x' || s[i] == 'X' || s[i] == 'p' || s[i] == 'P' || s[i] == '_') return std::nullopt;
    out += s[i];
  }
  return out;
}

auto do_int(const value& v, const call_args& a) -> value {
  if (v.is_undefined()) fail("int() of an undefined value"); // Undefined.__int__ raises
  const auto fallback = arg(a, 0, "default", value(0));
  if (v.is_int() || v.is_bool()) return v.as_int();
  const auto from_real = [&](double d) { return std::fabs(d) < 9.2e18 ? value(static_cast<std::int64_t>(d)) : fallback; };
  if (v.is_real()) return from_real(v.as_real());
  if (v.is_string()) {
    const auto base = arg(a, 1, "base", value(10)).as_int();
    const auto cleaned = base == 10 ? python_number_text(v.str()) : std::optional<std::string>(std::string(text::strip(v.str())));
    if (!cleaned) return fallback;
    const auto& s = *cleaned;
    char* end = nullptr;
    if (base < 2 || base > 36) fail("int() base must be >= 2 and <= 36");
    errno = 0;
    const auto i = std::strtoll(s.c_str(), &end, static_cast<int>(base));
    if (errno == ERANGE) fail("integer overflow (Python's big integers are not supported)");
    if (!s.empty() && end == s.c_str() + s.size()) return static_cast<std::int64_t>(i);
    const auto d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return from_real(d);
  }
  return fallback;
}

auto do_float(const value& v, const call_args& a) -> value {
  if (v.is_undefined()) fail("float() of an undefined value"); // Undefined.__float__ raises
  const auto fallback = arg(a, 0, "default", value(0.0));
  if (v.is_number()) return v.as_real();
  if (v.is_string()) {
    const auto cleaned = python_number_text(v.str());
    if (!cleaned) return fallback;
    const auto& s = *cleaned;
    char* end = nullptr;
    const auto d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return d;
  }
  return fallback;
}

auto do_tojson(const value& v, const call_args& a) -> value {
  json_options o;
  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  const auto indent = arg(a, 1, "indent", value::none());
  if (!indent.is_none()) {
    if (!indent.is_int()) fail("tojson: indent must be an integer");
    o.indent = static_cast<int>(std::max<std::int64_t>(0, indent.as_int()));
    o.item_separator = ",";
  }
  o.ensure_ascii = truthy_arg(a, 0, "ensure_ascii", false);
  o.sort_keys = truthy_arg(a, 3, "sort_keys", false);
  const auto seps = arg(a, 2, "separators", value::none());
  if (seps.is_array() && seps.arr().size() == 2 && seps.arr()[0].is_string() && seps.arr()[1].is_string()) {
    o.item_separator = seps.arr()[0].str();
    o.key_separator = seps.arr()[1].str();
  } else if (!seps.is_none()) {
    fail("tojson: separators must be a pair of strings");
  }
  return to_json(v, o);
}

// jinja2's do_indent: s + "\n" split into lines; the first line as it is
// (unless first), the others indented unless empty (unless blank).
auto do_indent(const value& v, const call_args& a) -> value {
  const auto width = arg(a, 0, "width", value(4));
  const bool first = truthy_arg(a, 1, "first", false), blank = truthy_arg(a, 2, "blank", false);
  const auto pad = width.is_string() ? width.str()
                                     : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, width.as_int())), ' ');
  if (!v.is_string()) fail("indent needs a string (jinja2 appends \"\\n\" to it)");
  const auto s = v.str() + "\n";
  std::vector<std::string> lines; // str.splitlines over \n, \r\n and \r
  std::size_t at = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(s.substr(at, i - at));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      at = i + 1;
    }
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n" + ((blank || !lines[i].empty()) ? pad : "");
    out += lines[i];
  }
  return first ? pad + out : out;
}

auto do_sort(const value& v, const call_args& a) -> value {
  const bool reverse = truthy_arg(a, 0, "reverse", false), cs = truthy_arg(a, 1, "case_sensitive", false);
  const auto attr = arg(a, 2, "attribute", value::none());
  auto items = iterate(v);
  const auto key = [&](const value& x) { return sort_key(attr.is_none() ? x : attribute(x, attr), cs); };
  std::stable_sort(items.begin(), items.end(), [&](const value& x, const value& y) {
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return items;
}

auto do_dictsort(const value& v, const call_args& a) -> value {
  if (!v.is_object()) fail("dictsort needs a dict");
  const bool cs = truthy_arg(a, 0, "case_sensitive", false);
  const auto by = arg(a, 1, "by", value("key"));
  const bool reverse = truthy_arg(a, 2, "reverse", false);
  const bool by_value = by.is_string() && by.str() == "value";
  array items;
  for (const auto& [k, x] : v.obj().entries) items.push_back(value::tuple(array{value(k), x}));
  std::stable_sort(items.begin(), items.end(), [&](const value& x, const value& y) {
    const auto kx = sort_key(x.arr()[by_value ? 1 : 0], cs), ky = sort_key(y.arr()[by_value ? 1 : 0], cs);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  return items;
}

auto do_unique_now(const value& v, const call_args& a) -> array;

auto do_unique(const value& v, const call_args& a) -> value {
  return generator([v, a] { return do_unique_now(v, a); });
}

auto do_unique_now(const value& v, const call_args& a) -> array {
  const bool cs = truthy_arg(a, 0, "case_sensitive", false);
  const auto attr = arg(a, 1, "attribute", value::none());
  array out, seen;
  for (const auto& x : iterate(v)) {
    const auto key = sort_key(attr.is_none() ? x : attribute(x, attr), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return out;
}

auto do_map_now(const value& v, const call_args& a) -> array;

auto do_map(const value& v, const call_args& a) -> value {
  if (!a.get(99, "attribute")) { // a filter name: refused at once, as jinja2 looks it up before iterating
    if (a.positional.empty() || !a.positional[0].is_string()) fail("map needs a filter name or attribute=");
    if (!is_known_filter(a.positional[0].str())) fail("filter \"" + a.positional[0].str() + "\" is not supported");
  }
  return generator([v, a] { return do_map_now(v, a); });
}

auto do_map_now(const value& v, const call_args& a) -> array {
  array out;
  if (!v.truthy()) return out; // jinja2: `if value:` before iterating
  if (const auto* attr = a.get(99, "attribute")) {
    const auto fallback = arg(a, 99, "default");
    for (const auto& x : iterate(v)) {
      auto y = attribute(x, *attr);
      out.push_back(y.is_undefined() && a.get(99, "default") ? fallback : y);
    }
    return out;
  }
  if (a.positional.empty() || !a.positional[0].is_string()) fail("map needs a filter name or attribute=");
  const auto name = a.positional[0].str();
  if (!is_known_filter(name)) fail("filter \"" + name + "\" is not supported");
  call_args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.named = a.named;
  for (const auto& x : iterate(v)) out.push_back(apply_filter(name, x, rest));
  return out;
}

auto do_join(const value& v, const call_args& a) -> value {
  const auto sep = to_str(arg(a, 0, "d", value("")));
  const auto attr = arg(a, 1, "attribute", value::none());
  std::string out;
  bool first = true;
  for (const auto& x : iterate(v)) {
    out += (first ? "" : sep) + to_str(attr.is_none() ? x : attribute(x, attr));
    check_text_size(out.size());
    first = false;
  }
  return out;
}

auto do_sum_min_max(std::string_view name, const value& v, const call_args& a) -> value {
  const auto items = iterate(v);
  if (name == "sum") {
    const auto attr = arg(a, 0, "attribute", value::none());
    value total = arg(a, 1, "start", value(0));
    for (const auto& x : items) total = binary_op("+", total, attr.is_none() ? x : attribute(x, attr));
    return total;
  }
  const bool cs = truthy_arg(a, 0, "case_sensitive", false);
  const auto attr = arg(a, 1, "attribute", value::none());
  if (items.empty()) return {};
  const auto key = [&](const value& x) { return sort_key(attr.is_none() ? x : attribute(x, attr), cs); };
  const value* best = &items[0];
  for (const auto& x : items)
    if (name == "min" ? less(key(x), key(*best)) : less(key(*best), key(x))) best = &x;
  return *best;
}

auto do_batch_now(const value& v, const call_args& a) -> array;

auto do_batch(const value& v, const call_args& a) -> value {
  return generator([v, a] { return do_batch_now(v, a); });
}

auto do_batch_now(const value& v, const call_args& a) -> array {
  const auto n = arg(a, 0, "linecount");
  if (!n.is_int() || n.as_int() <= 0) fail("batch needs a positive count");
  const auto* fill = a.get(1, "fill_with");
  array out, cur;
  for (const auto& x : iterate(v)) {
    cur.push_back(x);
    if (static_cast<std::int64_t>(cur.size()) == n.as_int()) {
      out.emplace_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill != nullptr && !fill->is_none())
      while (static_cast<std::int64_t>(cur.size()) < n.as_int()) cur.push_back(*fill);
    out.emplace_back(std::move(cur));
  }
  return out;
}

auto do_center(const value& v, const call_args& a) -> value {
  const auto s = to_str(v);
  const auto width = arg(a, 0, "width", value(80)).as_int();
  const auto len = static_cast<std::int64_t>(text::num_code_points(s));
  if (width <= len) return s;
  const auto total = width - len;
  const auto left = total / 2 + (total & width & 1); // CPython's str.center
  return std::string(static_cast<std::size_t>(left), ' ') + s + std::string(static_cast<std::size_t>(total - left), ' ');
}

using filter_fn = value (*)(std::string_view, const value&, const call_args&);

auto filters() -> const std::map<std::string_view, filter_fn>& {
  static const std::map<std::string_view, filter_fn> table = {
      {"tojson", [](std::string_view, const value& v, const call_args& a) { return do_tojson(v, a); }},
      {"trim", [](std::string_view, const value& v, const call_args& a) -> value {
         const auto s = to_str(v);
         const auto chars = arg(a, 0, "chars", value::none());
         if (chars.is_string()) return std::string(text::strip_chars(s, chars.str(), true, true));
         return std::string(text::strip(s));
       }},
      {"length", [](std::string_view, const value& v, const call_args&) -> value { return length_of(v); }},
      {"count", [](std::string_view, const value& v, const call_args&) -> value { return length_of(v); }},
      {"default", [](std::string_view, const value& v, const call_args& a) -> value {
         const bool boolean = truthy_arg(a, 1, "boolean", false);
         if (v.is_undefined() || (boolean && !v.truthy())) return arg(a, 0, "default_value", value(""));
         return v;
       }},
      {"items", [](std::string_view, const value& v, const call_args&) -> value {
         return generator([v] {
           array out;
           if (v.is_undefined()) return out;
           if (!v.is_object() || v.obj().is_namespace) fail("Can only get item pairs from a mapping.");
           for (const auto& [k, x] : v.obj().entries) out.push_back(value::tuple(array{value(k), x}));
           return out;
         });
       }},
      {"selectattr", [](std::string_view, const value& v, const call_args& a) { return select(v, a, true, true); }},
      {"rejectattr", [](std::string_view, const value& v, const call_args& a) { return select(v, a, true, false); }},
      {"select", [](std::string_view, const value& v, const call_args& a) { return select(v, a, false, true); }},
      {"reject", [](std::string_view, const value& v, const call_args& a) { return select(v, a, false, false); }},
      {"map", [](std::string_view, const value& v, const call_args& a) { return do_map(v, a); }},
      {"join", [](std::string_view, const value& v, const call_args& a) { return do_join(v, a); }},
      {"first", [](std::string_view, const value& v, const call_args&) -> value {
         const auto items = iterate(v);
         return items.empty() ? value{} : items.front();
       }},
      {"last", [](std::string_view, const value& v, const call_args&) -> value {
         // next(iter(reversed(seq))): a generator cannot be reversed
         if (v.is_lazy() && v.lazy().k == sequence::kind::generator) fail("'generator' object is not reversible");
         const auto items = iterate(v);
         return items.empty() ? value{} : items.back();
       }},
      {"list", [](std::string_view, const value& v, const call_args&) -> value { return iterate(v); }},
      {"reverse", [](std::string_view, const value& v, const call_args&) -> value {
         if (v.is_string()) return get_slice(v, {}, {}, value(-1));
         // reversed(value), an iterator; a generator is listed and reversed
         auto items = iterate(v);
         std::reverse(items.begin(), items.end());
         if (v.is_lazy() && v.lazy().k == sequence::kind::generator) return items;
         return generator([items] { return items; });
       }},
      {"upper", [](std::string_view, const value& v, const call_args&) -> value { return text::upper(to_str(v)); }},
      {"lower", [](std::string_view, const value& v, const call_args&) -> value { return text::lower(to_str(v)); }},
      {"capitalize", [](std::string_view, const value& v, const call_args&) -> value { return text::capitalize(to_str(v)); }},
      {"title", [](std::string_view, const value& v, const call_args&) -> value { return text::title(to_str(v)); }},
      {"replace", [](std::string_view, const value& v, const call_args& a) -> value {
         const auto count = arg(a, 2, "count", value::none());
         return text::replace(to_str(v), to_str(arg(a, 0, "old")), to_str(arg(a, 1, "new")),
                              count.is_none() ? -1 : count.as_int());
       }},
      {"string", [](std::string_view, const value& v, const call_args&) -> value { return to_str(v); }},
      {"safe", [](std::string_view, const value& v, const call_args&) -> value {
         return v.is_string() ? v : value(to_str(v)); // Markup(value): a string
       }},
      {"int", [](std::string_view, const value& v, const call_args& a) { return do_int(v, a); }},
      {"float", [](std::string_view, const value& v, const call_args& a) { return do_float(v, a); }},
      {"abs", [](std::string_view, const value& v, const call_args&) -> value {
         if (!v.is_number()) fail("bad operand type for abs()");
         if (v.is_real()) return std::fabs(v.as_real());
         if (v.as_int() == INT64_MIN) fail("integer overflow in abs");
         return v.as_int() < 0 ? -v.as_int() : v.as_int();
       }},
      {"round", [](std::string_view, const value& v, const call_args& a) { return do_round(v, a); }},
      {"unique", [](std::string_view, const value& v, const call_args& a) { return do_unique(v, a); }},
      {"indent", [](std::string_view, const value& v, const call_args& a) { return do_indent(v, a); }},
      {"sort", [](std::string_view, const value& v, const call_args& a) { return do_sort(v, a); }},
      {"dictsort", [](std::string_view, const value& v, const call_args& a) { return do_dictsort(v, a); }},
      {"batch", [](std::string_view, const value& v, const call_args& a) { return do_batch(v, a); }},
      {"sum", [](std::string_view n, const value& v, const call_args& a) { return do_sum_min_max(n, v, a); }},
      {"min", [](std::string_view n, const value& v, const call_args& a) { return do_sum_min_max(n, v, a); }},
      {"max", [](std::string_view n, const value& v, const call_args& a) { return do_sum_min_max(n, v, a); }},
      {"center", [](std::string_view, const value& v, const call_args& a) { return do_center(v, a); }},
      {"attr", [](std::string_view, const value& v, const call_args& a) -> value {
         return get_attr(v, to_str(arg(a, 0, "name")));
       }},
      {"wordcount", [](std::string_view, const value& v, const call_args&) -> value {
         // len(re.findall(r"\w+", str(s))): ASCII only (Unicode's \w is not reproduced)
         const auto s = to_str(v);
         std::int64_t n = 0;
         bool in_word = false;
         for (const unsigned char c : s) {
           if (c >= 0x80) fail("wordcount of non-ASCII text is not supported");
           const bool word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
           if (word && !in_word) ++n;
           in_word = word;
         }
         return n;
       }},
  };
  return table;
}

auto canonical_filter(std::string_view name) -> std::string_view { return name == "d" ? "default" : name; }

auto as_test_arg(const call_args& a) -> value {
  if (a.positional.empty()) fail("the test needs an argument");
  return a.positional[0];
}

} // namespace

auto is_known_filter(std::string_view name) -> bool { return filters().count(canonical_filter(name)) > 0; }

auto apply_filter(std::string_view name, const value& subject, const call_args& args) -> value {
  const auto canonical = canonical_filter(name);
  const auto it = filters().find(canonical);
  if (it == filters().end()) fail("filter \"" + std::string(name) + "\" is not supported");
  return it->second(canonical, subject, args);
}

auto is_known_test(std::string_view name) -> bool {
  static const std::vector<std::string_view> names = {
      "defined", "undefined", "none",    "string", "mapping", "iterable", "sequence", "number", "integer",
      "float",   "boolean",   "true",    "false",  "callable", "equalto", "eq",       "==",     "ne",
      "!=",      "lt",        "<",       "le",     "<=",      "gt",       ">",        "ge",     ">=",
      "in",      "sameas",    "odd",     "even",   "divisibleby", "lower", "upper",   "escaped"};
  return std::find(names.begin(), names.end(), name) != names.end();
}

auto apply_test(std::string_view name, const value& v, const call_args& a) -> bool {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object() && !v.obj().is_namespace;
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_array() || v.is_lazy() || (v.is_object() && !v.obj().is_namespace);
  if (name == "sequence") // len() and __getitem__
    return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.obj().is_namespace) ||
           (v.is_lazy() && v.lazy().k == sequence::kind::range);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_real();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_function();
  if (name == "escaped") return false;
  if (name == "equalto" || name == "eq" || name == "==") return equals(v, as_test_arg(a));
  if (name == "ne" || name == "!=") return !equals(v, as_test_arg(a));
  if (name == "lt" || name == "<") return compare_op("<", v, as_test_arg(a));
  if (name == "le" || name == "<=") return compare_op("<=", v, as_test_arg(a));
  if (name == "gt" || name == ">") return compare_op(">", v, as_test_arg(a));
  if (name == "ge" || name == ">=") return compare_op(">=", v, as_test_arg(a));
  if (name == "in") return compare_op("in", v, as_test_arg(a));
  if (name == "sameas") {
    const auto other = as_test_arg(a);
    // Python's `is`: identity; for the singletons None/True/False it is equality.
    if (v.is_none() || v.is_bool() || other.is_none() || other.is_bool())
      return v.type() == other.type() && equals(v, other);
    fail("sameas on non-singleton values is not supported");
  }
  if (name == "odd") return equals(binary_op("%", v, value(2)), value(1)); // value % 2 == 1, floats too
  if (name == "even") return equals(binary_op("%", v, value(2)), value(0));
  if (name == "divisibleby") return equals(binary_op("%", v, as_test_arg(a)), value(0));
  if (name == "lower") return to_str(v) == text::lower(to_str(v)) && to_str(v) != text::upper(to_str(v));
  if (name == "upper") return to_str(v) == text::upper(to_str(v)) && to_str(v) != text::lower(to_str(v));
  fail("test \"" + std::string(name) + "\" is not supported");
}

} // namespace troupe::jinja
