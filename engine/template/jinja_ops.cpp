// Value operations with Python's and jinja2's semantics: lookups through
// SandboxedEnvironment.getattr/getitem, bound str/dict/list methods,
// arithmetic, comparison and membership. The filters and tests are in
// jinja_filters.cpp.

#include "engine/template/jinja_builtins.hpp"
#include "engine/template/text.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

namespace troupe::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { throw render_error(what); }

} // namespace

auto type_name(const value& v) -> std::string {
  switch (v.type()) {
  case value::kind::undefined: return "Undefined";
  case value::kind::none: return "NoneType";
  case value::kind::boolean: return "bool";
  case value::kind::integer: return "int";
  case value::kind::real: return "float";
  case value::kind::string: return "str";
  case value::kind::array: return v.is_tuple() ? "tuple" : "list";
  case value::kind::object: return v.obj().is_namespace ? "Namespace" : "dict";
  case value::kind::function: return "function";
  case value::kind::lazy: return v.lazy().k == sequence::kind::range ? "range" : v.lazy().label;
  }
  return "?";
}

namespace {

// Python's attribute names of str, dict and list: such a name is a method
// (jinja2 tries getattr before the item for x.name), whether troupe has it
// or not; one it lacks is refused rather than read as an item.
constexpr std::array k_str_attrs = {
    "capitalize", "casefold",  "center",   "count",      "encode",    "endswith",     "expandtabs", "find",
    "format",     "format_map", "index",   "isalnum",    "isalpha",   "isascii",      "isdecimal",  "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle",     "isupper",    "join",
    "ljust",      "lower",     "lstrip",   "maketrans",  "partition", "removeprefix", "removesuffix", "replace",
    "rfind",      "rindex",    "rjust",    "rpartition", "rsplit",    "rstrip",       "split",      "splitlines",
    "startswith", "strip",     "swapcase", "title",      "translate", "upper",        "zfill"};
constexpr std::array k_dict_attrs = {"clear", "copy",  "fromkeys", "get",        "items",
                                     "keys",  "pop",   "popitem",  "setdefault", "update", "values"};
constexpr std::array k_list_attrs = {"append", "clear", "copy", "count", "extend", "index",
                                     "insert", "pop",   "remove", "reverse", "sort"};

template <std::size_t N>
auto among(const std::array<const char*, N>& names, std::string_view name) -> bool {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

auto arg_str(const call_args& a, std::size_t i, const char* name, const char* method) -> const value* {
  const auto* v = a.get(i, name);
  if (v != nullptr && !v->is_none() && !v->is_string())
    type_error(std::string(method) + "() argument must be str or None, not " + type_name(*v));
  return v != nullptr && v->is_string() ? v : nullptr;
}

auto arg_int(const call_args& a, std::size_t i, const char* name, std::int64_t fallback) -> std::int64_t {
  const auto* v = a.get(i, name);
  if (v == nullptr) return fallback;
  if (!v->is_int() && !v->is_bool()) type_error("an integer is required, not " + type_name(*v));
  return v->as_int();
}

auto bound(std::string name, std::function<value(const call_args&)> fn) -> value {
  return value(function{std::move(name), std::move(fn)});
}

auto prefix_test(const std::string& s, const value& arg, bool at_end) -> bool {
  const auto one = [&](const value& p) {
    if (!p.is_string()) type_error("startswith first arg must be str or a tuple of str, not " + type_name(p));
    const auto& x = p.str();
    return x.size() <= s.size() && (at_end ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.rfind(x, 0) == 0);
  };
  if (arg.is_array()) return std::any_of(arg.arr().begin(), arg.arr().end(), one);
  return one(arg);
}

/// str.strip, lstrip and rstrip.
auto strip_method(const std::string& s, std::string_view name) -> value {
  const bool left = name != "rstrip", right = name != "lstrip";
  return bound(std::string(name), [s, left, right, n = std::string(name)](const call_args& a) -> value {
    if (const auto* chars = arg_str(a, 0, "chars", n.c_str())) return std::string(text::strip_chars(s, chars->str(), left, right));
    auto v = std::string_view(s);
    if (left) v = text::lstrip(v);
    if (right) v = text::rstrip(v);
    return std::string(v);
  });
}

/// str.split and rsplit (rsplit without maxsplit).
auto split_method(const std::string& s, std::string_view name) -> value {
  return bound(std::string(name), [s, r = name == "rsplit"](const call_args& a) -> value {
    const auto* sep = arg_str(a, 0, "sep", "split");
    const auto maxsplit = arg_int(a, 1, "maxsplit", -1);
    if (sep != nullptr && sep->str().empty()) type_error("empty separator");
    if (r && maxsplit >= 0) type_error("rsplit with maxsplit is not supported");
    array out;
    for (auto& part : text::split(s, sep ? sep->str() : "", maxsplit, sep != nullptr)) out.emplace_back(std::move(part));
    return out;
  });
}

/// str.replace.
auto replace_method(const std::string& s) -> value {
  return bound("replace", [s](const call_args& a) -> value {
    const auto* from = a.get(0, "old");
    const auto* to = a.get(1, "new");
    if (from == nullptr || to == nullptr || !from->is_string() || !to->is_string())
      type_error("replace() arguments must be str");
    return text::replace(s, from->str(), to->str(), arg_int(a, 2, "count", -1));
  });
}

/// str.find and count.
auto find_method(const std::string& s, std::string_view name) -> value {
  return bound(std::string(name), [s, count = name == "count"](const call_args& a) -> value {
    const auto* sub = a.get(0, "sub");
    if (sub == nullptr || !sub->is_string() || a.positional.size() > 1) type_error("find()/count() take one str here");
    if (count) {
      if (sub->str().empty()) return static_cast<std::int64_t>(text::num_code_points(s) + 1);
      std::int64_t n = 0;
      for (auto at = s.find(sub->str()); at != std::string::npos; at = s.find(sub->str(), at + sub->str().size())) ++n;
      return n;
    }
    const auto at = s.find(sub->str());
    return at == std::string::npos ? std::int64_t{-1} : static_cast<std::int64_t>(text::num_code_points(s.substr(0, at)));
  });
}

/// str.join.
auto join_method(const std::string& s) -> value {
  return bound("join", [s](const call_args& a) -> value {
    if (a.positional.size() != 1) type_error("join() takes one argument");
    std::string out;
    bool first = true;
    for (const auto& x : iterate(a.positional[0])) {
      if (!x.is_string()) type_error("sequence item: expected str instance, " + type_name(x) + " found");
      out += (first ? "" : s) + x.str();
      first = false;
    }
    return out;
  });
}

/// str.splitlines.
auto splitlines_method(const std::string& s) -> value {
  return bound("splitlines", [s](const call_args&) -> value {
    array out;
    std::size_t at = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' || s[i] == '\r') {
        out.emplace_back(s.substr(at, i - at));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        at = i + 1;
      }
    if (at < s.size()) out.emplace_back(s.substr(at));
    return out;
  });
}

/// str.isdigit, isalpha, isalnum, isspace, islower and isupper, on ASCII text.
auto char_class_method(const std::string& s, std::string_view name) -> value {
  return bound(std::string(name), [s, n = std::string(name)](const call_args&) -> value {
    if (s.empty()) return false;
    bool any_cased = false;
    for (const unsigned char c : s) {
      if (c >= 0x80) type_error("str." + n + "() on non-ASCII text is not supported");
      const bool digit = c >= '0' && c <= '9', lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
      any_cased = any_cased || lo || up;
      if (n == "isdigit" && !digit) return false;
      if (n == "isalpha" && !lo && !up) return false;
      if (n == "isalnum" && !lo && !up && !digit) return false;
      if (n == "isspace" && text::space_at(std::string_view(reinterpret_cast<const char*>(&c), 1), 0) == 0) return false;
      if (n == "islower" && up) return false;
      if (n == "isupper" && lo) return false;
    }
    return n == "islower" || n == "isupper" ? any_cased : true;
  });
}

auto string_method(const std::string& s, std::string_view name) -> value {
  if (name == "strip" || name == "lstrip" || name == "rstrip") return strip_method(s, name);
  if (name == "split" || name == "rsplit") return split_method(s, name);
  if (name == "startswith" || name == "endswith") {
    return bound(std::string(name), [s, end = name == "endswith"](const call_args& a) -> value {
      if (a.positional.size() != 1) type_error("startswith/endswith take one argument here");
      return prefix_test(s, a.positional[0], end);
    });
  }
  if (name == "upper") return bound("upper", [s](const call_args&) -> value { return text::upper(s); });
  if (name == "lower") return bound("lower", [s](const call_args&) -> value { return text::lower(s); });
  if (name == "title") return bound("title", [s](const call_args&) -> value { return text::title(s); });
  if (name == "capitalize") return bound("capitalize", [s](const call_args&) -> value { return text::capitalize(s); });
  if (name == "replace") return replace_method(s);
  if (name == "find" || name == "count") return find_method(s, name);
  if (name == "join") return join_method(s);
  if (name == "splitlines") return splitlines_method(s);
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper")
    return char_class_method(s, name);
  if (name == "format") return bound("format", [s](const call_args& a) { return str_format(s, a); });
  type_error("str." + std::string(name) + "() is not supported");
}

auto dict_method(const value& d, std::string_view name) -> value {
  if (name == "get") {
    return bound("get", [d](const call_args& a) -> value {
      if (a.positional.empty() || a.positional.size() > 2) type_error("get expected 1 or 2 arguments");
      const auto& key = a.positional[0];
      const value* hit = key.is_string() ? d.obj().find(key.str()) : nullptr;
      if (hit != nullptr) return *hit;
      return a.positional.size() == 2 ? a.positional[1] : value::none();
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    return bound(std::string(name), [d, n = std::string(name)](const call_args&) -> value {
      sequence view{sequence::kind::view, [d, n] {
                      array out;
                      for (const auto& [k, v] : d.obj().entries) {
                        if (n == "items") out.push_back(value::tuple(array{value(k), v}));
                        else if (n == "keys") out.emplace_back(k);
                        else out.push_back(v);
                      }
                      return out;
                    },
                    "dict_" + n};
      return value(std::move(view));
    });
  }
  type_error("dict." + std::string(name) + "() is not supported");
}

auto list_method(const value& l, std::string_view name) -> value {
  if (name == "count" || name == "index") {
    return bound(std::string(name), [l, count = name == "count"](const call_args& a) -> value {
      if (a.positional.size() != 1) type_error("list.index()/count() take one argument here");
      std::int64_t n = 0;
      for (std::size_t i = 0; i < l.arr().size(); ++i)
        if (equals(l.arr()[i], a.positional[0])) {
          if (!count) return static_cast<std::int64_t>(i);
          ++n;
        }
      if (!count) type_error("value is not in list");
      return n;
    });
  }
  type_error("list." + std::string(name) + "() is not supported (the sandbox keeps lists immutable)");
}

/// getattr(x, name) for a method, or nullopt-like undefined.
auto method(const value& subject, std::string_view name) -> value {
  if (subject.is_string() && among(k_str_attrs, name)) return string_method(subject.str(), name);
  if (subject.is_object() && !subject.obj().is_namespace && among(k_dict_attrs, name)) return dict_method(subject, name);
  if (subject.is_array() && among(k_list_attrs, name)) return list_method(subject, name);
  if (subject.is_lazy() && subject.lazy().k == sequence::kind::range && (name == "count" || name == "index"))
    return list_method(value(subject.lazy().produce()), name);
  return {};
}

auto index_of(std::int64_t i, std::size_t size, bool& ok) -> std::size_t {
  if (i < 0) i += static_cast<std::int64_t>(size);
  ok = i >= 0 && static_cast<std::size_t>(i) < size;
  return static_cast<std::size_t>(i);
}

/// Python's floor division and modulo on integers.
auto floor_div(std::int64_t a, std::int64_t b) -> std::int64_t {
  const auto q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/// Python's arithmetic on two integers (but /); nullopt for another operator.
auto int_arithmetic(std::string_view op, std::int64_t x, std::int64_t y) -> std::optional<value> {
  std::int64_t r = 0;
  const auto checked = [&](bool overflow) -> value {
    if (overflow) type_error("integer overflow in '" + std::string(op) + "' (Python's big integers are not supported)");
    return r;
  };
  if (op == "+") return checked(__builtin_add_overflow(x, y, &r));
  if (op == "-") return checked(__builtin_sub_overflow(x, y, &r));
  if (op == "*") return checked(__builtin_mul_overflow(x, y, &r));
  if (op == "//" || op == "%") {
    if (y == 0) type_error("integer division or modulo by zero");
    if (y == -1) return op == "%" ? std::int64_t{0} : (r = 0, checked(__builtin_sub_overflow(std::int64_t{0}, x, &r)));
    return op == "//" ? floor_div(x, y) : x - floor_div(x, y) * y;
  }
  if (op == "**") {
    if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
    if (x == 0 || x == 1) return y == 0 ? std::int64_t{1} : x;
    if (x == -1) return y % 2 == 0 ? std::int64_t{1} : std::int64_t{-1};
    r = 1;
    for (std::int64_t k = 0; k < y; ++k)
      if (__builtin_mul_overflow(r, x, &r)) return checked(true);
    return r;
  }
  return std::nullopt;
}

/// Python's arithmetic on floats (but /); nullopt for another operator.
auto real_arithmetic(std::string_view op, double x, double y) -> std::optional<value> {
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "//" || op == "%") {
    if (y == 0) type_error("float division or modulo by zero");
    const auto q = std::floor(x / y);
    if (op == "//") return q;
    auto m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return m;
  }
  if (op == "**") return std::pow(x, y);
  return std::nullopt;
}

/// + joining strings or lists, * repeating one; nullopt for other operands.
auto sequence_op(std::string_view op, const value& a, const value& b) -> std::optional<value> {
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_text_size(a.str().size() + b.str().size());
      return a.str() + b.str();
    }
    if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) { // list + tuple is a TypeError
      array out = a.arr();
      out.insert(out.end(), b.arr().begin(), b.arr().end());
      return a.is_tuple() ? value::tuple(std::move(out)) : value(std::move(out));
    }
  }
  if (op == "*") {
    const value& seq = a.is_number() ? b : a;
    const value& count = a.is_number() ? a : b;
    if ((count.is_int() || count.is_bool()) && (seq.is_string() || seq.is_array())) {
      const auto n = std::max<std::int64_t>(0, count.as_int());
      const auto unit = seq.is_string() ? seq.str().size() : seq.arr().size();
      if (unit > 0 && n > static_cast<std::int64_t>((std::size_t{1} << 24) / unit)) type_error("repetition result too large");
      if (seq.is_string()) {
        std::string out;
        for (std::int64_t k = 0; k < n; ++k) out += seq.str();
        return out;
      }
      array out;
      for (std::int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.arr().begin(), seq.arr().end());
      return out;
    }
  }
  return std::nullopt;
}

} // namespace

auto get_attr(const value& subject, std::string_view name) -> value {
  if (subject.is_undefined()) type_error("'Undefined' has no attribute '" + std::string(name) + "'");
  if (auto m = method(subject, name); !m.is_undefined()) return m;
  if (subject.is_object()) {
    if (const auto* v = subject.obj().find(name)) return *v;
  }
  return {};
}

auto get_item(const value& subject, const value& key) -> value {
  if (subject.is_undefined()) type_error("'Undefined' has no item " + to_repr(key));
  if (subject.is_object() && key.is_string()) { // (a namespace's ns['x'] is its attribute x)
    if (const auto* v = subject.obj().find(key.str())) return *v;
  } else if ((subject.is_array() || subject.is_string() ||
              (subject.is_lazy() && subject.lazy().k == sequence::kind::range)) &&
             (key.is_int() || key.is_bool())) {
    bool ok = false;
    if (subject.is_lazy()) {
      const auto items = subject.lazy().produce();
      const auto i = index_of(key.as_int(), items.size(), ok);
      if (ok) return items[i];
    } else if (subject.is_array()) {
      const auto i = index_of(key.as_int(), subject.arr().size(), ok);
      if (ok) return subject.arr()[i];
    } else {
      const auto starts = text::code_point_starts(subject.str());
      const auto i = index_of(key.as_int(), starts.size() - 1, ok);
      if (ok) return subject.str().substr(starts[i], starts[i + 1] - starts[i]);
    }
    return {};
  }
  if (key.is_string()) return method(subject, key.str());
  return {};
}

auto get_slice(const value& subject, const value& start, const value& stop, const value& step) -> value {
  // jinja2 slices with Python's own subscript, not its getitem: anything
  // but a list or a string fails.
  if (!subject.is_array() && !subject.is_string()) type_error("'" + type_name(subject) + "' object is not subscriptable");
  const auto as_index = [](const value& v, const char* what) -> std::optional<std::int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) type_error(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  std::vector<std::size_t> starts;
  std::int64_t n = 0;
  if (subject.is_array()) {
    n = static_cast<std::int64_t>(subject.arr().size());
  } else {
    starts = text::code_point_starts(subject.str());
    n = static_cast<std::int64_t>(starts.size()) - 1;
  }
  const std::int64_t st = as_index(step, "step").value_or(1);
  if (st == 0) type_error("slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  const auto adjust = [&](std::optional<std::int64_t> v, std::int64_t if_none) {
    if (!v) return if_none;
    auto i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const auto lo = adjust(as_index(start, "start"), st < 0 ? n - 1 : 0);
  const auto hi = adjust(as_index(stop, "stop"), st < 0 ? -1 : n);
  std::vector<std::int64_t> picks;
  for (auto i = lo; st > 0 ? i < hi : i > hi; i += st) picks.push_back(i);
  if (subject.is_array()) {
    array out;
    for (const auto i : picks) out.push_back(subject.arr()[static_cast<std::size_t>(i)]);
    return subject.is_tuple() ? value::tuple(std::move(out)) : value(std::move(out));
  }
  std::string out;
  for (const auto i : picks) {
    const auto k = static_cast<std::size_t>(i);
    out += subject.str().substr(starts[k], starts[k + 1] - starts[k]);
  }
  return out;
}

auto binary_op(std::string_view op, const value& a, const value& b) -> value {
  if (op == "~") {
    auto joined = to_str(a);
    const auto right = to_str(b);
    check_text_size(joined.size() + right.size());
    joined += right;
    return joined;
  }
  if (op == "%" && a.is_string()) return percent_format(a.str(), b);
  if (a.is_undefined() || b.is_undefined()) type_error("an undefined value in '" + std::string(op) + "'");
  const auto unsupported = [&]() -> value {
    type_error("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  };
  if (a.is_number() && b.is_number()) {
    const bool real = a.is_real() || b.is_real();
    if (op == "/") {
      if (b.as_real() == 0) type_error("division by zero");
      return a.as_real() / b.as_real();
    }
    auto r = !real ? int_arithmetic(op, a.as_int(), b.as_int()) : real_arithmetic(op, a.as_real(), b.as_real());
    if (r) return std::move(*r);
    return unsupported();
  }
  if (auto r = sequence_op(op, a, b)) return std::move(*r);
  return unsupported();
}

auto unary_minus(const value& a, bool negate) -> value {
  if (!a.is_number()) type_error("bad operand type for unary " + std::string(negate ? "-" : "+") + ": '" + type_name(a) + "'");
  if (a.is_real()) return negate ? -a.as_real() : a.as_real();
  std::int64_t r = a.as_int();
  if (negate && __builtin_sub_overflow(std::int64_t{0}, a.as_int(), &r)) type_error("integer overflow in unary -");
  return r;
}

namespace {

/// Python's a < b: -1, 0, 1; throws for unorderable types.
auto order(const value& a, const value& b) -> int {
  if (a.is_number() && b.is_number()) {
    if (a.is_real() || b.is_real()) return a.as_real() < b.as_real() ? -1 : a.as_real() > b.as_real() ? 1 : 0;
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
  if (a.is_array() && b.is_array()) {
    const auto &x = a.arr(), &y = b.arr();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return order(x[i], y[i]);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  type_error("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

} // namespace

auto compare_op(std::string_view op, const value& a, const value& b) -> bool {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) type_error("'in <string>' requires string as left operand, not " + type_name(a));
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_object() && !b.obj().is_namespace) {
      if ((a.is_array() && !a.is_tuple()) || a.is_object() || a.is_lazy()) type_error("unhashable type: '" + type_name(a) + "'");
      found = a.is_string() && b.obj().find(a.str()) != nullptr;
    } else if (b.is_array()) { // (not copied: `x in messages` in a loop over them)
      found = std::any_of(b.arr().begin(), b.arr().end(), [&](const value& x) { return equals(x, a); });
    } else {
      for (const auto& x : iterate(b))
        if (equals(x, a)) {
          found = true;
          break;
        }
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined() || b.is_undefined()) type_error("an undefined value in '" + std::string(op) + "'");
  const int c = order(a, b);
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

auto iterate(const value& v) -> array {
  switch (v.type()) {
  case value::kind::undefined: return {};
  case value::kind::lazy: {
    const auto& seq = v.lazy();
    if (seq.k != sequence::kind::generator) return seq.produce();
    if (seq.consumed) return {};
    seq.consumed = true;
    return seq.produce();
  }
  case value::kind::array: return v.arr();
  case value::kind::string: {
    array out;
    const auto starts = text::code_point_starts(v.str());
    for (std::size_t k = 0; k + 1 < starts.size(); ++k) out.emplace_back(v.str().substr(starts[k], starts[k + 1] - starts[k]));
    return out;
  }
  case value::kind::object:
    if (!v.obj().is_namespace) {
      array out;
      for (const auto& [k, x] : v.obj().entries) out.emplace_back(k);
      return out;
    }
    break;
  default: break;
  }
  type_error("'" + type_name(v) + "' object is not iterable");
}

auto length_of(const value& v) -> std::int64_t {
  switch (v.type()) {
  case value::kind::undefined: return 0;
  case value::kind::lazy:
    if (v.lazy().k != sequence::kind::generator) return static_cast<std::int64_t>(v.lazy().produce().size());
    break;
  case value::kind::string: return static_cast<std::int64_t>(text::num_code_points(v.str()));
  case value::kind::array: return static_cast<std::int64_t>(v.arr().size());
  case value::kind::object:
    if (!v.obj().is_namespace) return static_cast<std::int64_t>(v.obj().entries.size());
    break;
  default: break;
  }
  type_error("object of type '" + type_name(v) + "' has no len()");
}

} // namespace troupe::jinja
