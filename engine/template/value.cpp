#include "engine/template/value.hpp"

#include "base/utf8.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

namespace troupe::jinja {

auto object::find(std::string_view key) const -> const value* {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void object::set(std::string key, value v) {
  for (auto& [k, old] : entries)
    if (k == key) {
      old = std::move(v);
      return;
    }
  entries.emplace_back(std::move(key), std::move(v));
}

auto call_args::get(std::size_t i, std::string_view name) const -> const value* {
  if (i < positional.size()) return &positional[i];
  for (const auto& [k, v] : named)
    if (k == name) return &v;
  return nullptr;
}

auto value::none() -> value {
  value v;
  v.v_ = nullptr;
  return v;
}

auto value::tuple(array a) -> value {
  value v(std::move(a));
  v.tuple_ = true;
  return v;
}

auto value::as_int() const -> std::int64_t {
  if (is_bool()) return as_bool() ? 1 : 0;
  return get<std::int64_t>("an integer");
}

auto value::as_real() const -> double {
  if (is_real()) return std::get<double>(v_);
  if (!is_int() && !is_bool()) throw render_error("expected a number");
  return static_cast<double>(as_int());
}

auto value::truthy() const -> bool {
  switch (type()) {
  case kind::undefined:
  case kind::none: return false;
  case kind::boolean: return as_bool();
  case kind::integer: return as_int() != 0;
  case kind::real: return as_real() != 0.0;
  case kind::string: return !str().empty();
  case kind::array: return !arr().empty();
  case kind::object: return obj().is_namespace || !obj().entries.empty();
  case kind::function: return true;
  case kind::lazy: return lazy().k == sequence::kind::generator || !lazy().produce().empty();
  }
  return false;
}

auto equals(const value& a, const value& b) -> bool {
  if (a.is_number() && b.is_number()) {
    if (a.is_real() || b.is_real()) return a.as_real() == b.as_real();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
  case value::kind::undefined:
  case value::kind::none: return true;
  case value::kind::string: return a.str() == b.str();
  case value::kind::array: {
    const auto &x = a.arr(), &y = b.arr();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i])) return false;
    return true;
  }
  case value::kind::object: {
    if (a.obj_ptr() == b.obj_ptr()) return true;
    if (a.obj().is_namespace || b.obj().is_namespace) return false; // identity, as Python's
    const auto &x = a.obj().entries, &y = b.obj().entries;
    if (x.size() != y.size()) return false;
    for (const auto& [k, v] : x) {
      const auto* other = b.obj().find(k);
      if (other == nullptr || !equals(v, *other)) return false;
    }
    return true;
  }
  case value::kind::function: return &a.fn() == &b.fn();
  case value::kind::lazy: return &a.lazy() == &b.lazy();
  default: return false;
  }
}

auto format_real(double d) -> std::string {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  // The shortest digits that round-trip, as Python's repr finds them.
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const auto text = std::string_view(buf, static_cast<std::size_t>(res.ptr - buf));
  const auto e = text.find('e');
  auto mantissa = text.substr(0, e);
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(), exponent);
  std::string sign;
  if (mantissa.front() == '-') {
    sign = "-";
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (const char c : mantissa)
    if (c != '.') digits += c;
  if (exponent >= -5 + 1 && exponent < 16) { // Python: fixed for 1e-4 <= |d| < 1e16
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<std::size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<std::size_t>(exponent) + 1) + "." +
            digits.substr(static_cast<std::size_t>(exponent) + 1);
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + out + exp;
}

namespace {

/// The code point of the UTF-8 sequence at s[i] and its length (a stray
/// byte counts as itself, length 1).
auto decode_utf8(std::string_view s, std::size_t i, std::size_t& len) -> std::uint32_t {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  std::uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  len = n;
  return cp;
}

void append_hex(std::string& out, const char* format, std::uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, cp);
  out += buf;
}

/// str.isprintable() of one code point: not the controls, format
/// characters, separators other than the space, private use and
/// non-characters (unassigned code points count as printable here).
auto printable(std::uint32_t cp) -> bool {
  static constexpr std::uint32_t not_printable[][2] = {
      {0x00, 0x1f},       {0x7f, 0xa0},       {0xad, 0xad},       {0x0600, 0x0605},   {0x061c, 0x061c},
      {0x06dd, 0x06dd},   {0x070f, 0x070f},   {0x0890, 0x0891},   {0x08e2, 0x08e2},   {0x1680, 0x1680},
      {0x180e, 0x180e},   {0x2000, 0x200f},   {0x2028, 0x202f},   {0x205f, 0x2064},   {0x2066, 0x206f},
      {0x3000, 0x3000},   {0xd800, 0xf8ff},   {0xfdd0, 0xfdef},   {0xfeff, 0xfeff},   {0xfff9, 0xfffb},
      {0xfffe, 0xffff},   {0x110bd, 0x110bd}, {0x110cd, 0x110cd}, {0x13430, 0x1343f}, {0x1bca0, 0x1bca3},
      {0x1d173, 0x1d17a}, {0xe0001, 0xe0001}, {0xe0020, 0xe007f}, {0xf0000, 0x10ffff}};
  if ((cp & 0xfffe) == 0xfffe) return false;
  for (const auto& r : not_printable)
    if (cp >= r[0] && cp <= r[1]) return false;
  return true;
}

} // namespace

auto repr_string(std::string_view s) -> std::string {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const char quote = has_single && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 1;
    const auto cp = decode_utf8(s, i, len);
    if (cp == static_cast<std::uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!printable(cp)) {
      append_hex(out, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out + quote;
}

auto to_repr(const value& v) -> std::string {
  switch (v.type()) {
  case value::kind::string: return repr_string(v.str());
  case value::kind::undefined: return "Undefined";
  default: break;
  }
  return to_str(v);
}

auto to_str(const value& v) -> std::string {
  switch (v.type()) {
  case value::kind::undefined: return "";
  case value::kind::none: return "None";
  case value::kind::boolean: return v.as_bool() ? "True" : "False";
  case value::kind::integer: return std::to_string(v.as_int());
  case value::kind::real: return format_real(v.as_real());
  case value::kind::string: return v.str();
  case value::kind::array: {
    std::string out = v.is_tuple() ? "(" : "[";
    for (std::size_t i = 0; i < v.arr().size(); ++i) out += (i ? ", " : "") + to_repr(v.arr()[i]);
    if (v.is_tuple()) return out + (v.arr().size() == 1 ? ",)" : ")");
    return out + "]";
  }
  case value::kind::object: {
    std::string out = v.obj().is_namespace ? "<Namespace {" : "{";
    bool first = true;
    for (const auto& [k, x] : v.obj().entries) {
      out += (first ? "" : ", ") + repr_string(k) + ": " + to_repr(x);
      first = false;
    }
    return out + (v.obj().is_namespace ? "}>" : "}");
  }
  case value::kind::function: throw render_error("cannot print the callable " + v.fn().name);
  case value::kind::lazy:
    switch (v.lazy().k) {
    case sequence::kind::generator:
      throw render_error("cannot print a generator (jinja2 prints its address): add | list");
    case sequence::kind::view: return v.lazy().label + "(" + to_str(v.lazy().produce()) + ")";
    case sequence::kind::range: return v.lazy().label;
    }
  }
  return "";
}

void check_text_size(std::size_t bytes) {
  if (bytes > max_text_bytes)
    throw render_error("the template's text grew past " + std::to_string(max_text_bytes >> 20) + " MiB");
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        append_hex(out, "\\u%04x", c);
      } else if (c >= 0x80 && ensure_ascii) {
        auto cp = decode_utf8(s, i, len);
        if (cp >= 0x10000) {
          cp -= 0x10000;
          append_hex(out, "\\u%04x", 0xd800 + (cp >> 10));
          append_hex(out, "\\u%04x", 0xdc00 + (cp & 0x3ff));
        } else {
          append_hex(out, "\\u%04x", cp);
        }
      } else {
        out += static_cast<char>(c);
      }
    }
    i += len;
  }
  out += '"';
}

void json_value(std::string& out, const value& v, const json_options& o, int depth) {
  check_text_size(out.size());
  const auto newline = [&](int d) {
    if (o.indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(o.indent * d), ' ');
  };
  switch (v.type()) {
  case value::kind::none: out += "null"; return;
  case value::kind::boolean: out += v.as_bool() ? "true" : "false"; return;
  case value::kind::integer: out += std::to_string(v.as_int()); return;
  case value::kind::real: {
    const double d = v.as_real();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : format_real(d);
    return;
  }
  case value::kind::string: json_string(out, v.str(), o.ensure_ascii); return;
  case value::kind::array: {
    const auto& a = v.arr();
    if (a.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (i) out += o.item_separator;
      newline(depth + 1);
      json_value(out, a[i], o, depth + 1);
    }
    newline(depth);
    out += ']';
    return;
  }
  case value::kind::object: {
    if (v.obj().is_namespace) throw render_error("Object of type Namespace is not JSON serializable");
    auto entries = std::vector<const std::pair<std::string, value>*>{};
    for (const auto& e : v.obj().entries) entries.push_back(&e);
    if (o.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    if (entries.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i) out += o.item_separator;
      newline(depth + 1);
      json_string(out, entries[i]->first, o.ensure_ascii);
      out += o.key_separator;
      json_value(out, entries[i]->second, o, depth + 1);
    }
    newline(depth);
    out += '}';
    return;
  }
  case value::kind::undefined: throw render_error("Object of type Undefined is not JSON serializable");
  case value::kind::function: throw render_error("Object of type function is not JSON serializable");
  case value::kind::lazy: throw render_error("Object of type " + v.lazy().label + " is not JSON serializable");
  }
}

/// A recursive-descent JSON reader (RFC 8259): objects keep their key order
/// (a repeated key keeps its first place, the last value, as Python's), an
/// integer beyond 64 bits becomes a float (Python keeps it exact: such
/// numbers are metadata, never rendered by chat templates).
class json_reader {
public:
  explicit json_reader(std::string_view text) : s_(text) {}

  auto document() -> value {
    auto v = parse(0);
    skip_space();
    if (at_ != s_.size()) fail("trailing characters");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw render_error(what + " at byte " + std::to_string(at_));
  }
  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
  }
  auto literal(std::string_view word) -> bool {
    if (s_.compare(at_, word.size(), word) != 0) return false;
    at_ += word.size();
    return true;
  }

  auto parse(int depth) -> value {
    if (depth > 512) fail("nested too deep");
    skip_space();
    if (at_ >= s_.size()) fail("unexpected end");
    const char c = s_[at_];
    if (c == '{') {
      ++at_;
      object o;
      skip_space();
      if (at_ < s_.size() && s_[at_] == '}') {
        ++at_;
        return o;
      }
      // Keys by their place, so a repeated key keeps its first place and its
      // last value (Python's json), in time linear in the keys.
      std::unordered_map<std::string, std::size_t> at;
      while (true) {
        skip_space();
        if (at_ >= s_.size() || s_[at_] != '"') fail("expected a key");
        auto key = string();
        skip_space();
        if (at_ >= s_.size() || s_[at_] != ':') fail("expected ':'");
        ++at_;
        auto v = parse(depth + 1);
        if (const auto [it, fresh] = at.try_emplace(key, o.entries.size()); fresh)
          o.entries.emplace_back(std::move(key), std::move(v));
        else
          o.entries[it->second].second = std::move(v);
        skip_space();
        if (at_ < s_.size() && s_[at_] == ',') {
          ++at_;
          continue;
        }
        if (at_ < s_.size() && s_[at_] == '}') {
          ++at_;
          return o;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++at_;
      array a;
      skip_space();
      if (at_ < s_.size() && s_[at_] == ']') {
        ++at_;
        return a;
      }
      while (true) {
        a.push_back(parse(depth + 1));
        skip_space();
        if (at_ < s_.size() && s_[at_] == ',') {
          ++at_;
          continue;
        }
        if (at_ < s_.size() && s_[at_] == ']') {
          ++at_;
          return a;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') return string();
    if (literal("true")) return true;
    if (literal("false")) return false;
    if (literal("null")) return value::none();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail("unexpected character");
  }

  auto number() -> value {
    const auto start = at_;
    const auto digits = [&] {
      const auto from = at_;
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
      if (at_ == from) fail("bad number");
    };
    if (s_[at_] == '-') ++at_;
    if (at_ < s_.size() && s_[at_] == '0') ++at_;
    else digits();
    bool real = false;
    if (at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      digits();
      real = true;
    }
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      digits();
      real = true;
    }
    const auto text = std::string(s_.substr(start, at_ - start));
    if (!real) {
      std::int64_t i = 0;
      const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
      if (ec == std::errc{} && p == text.data() + text.size()) return i;
    }
    return std::strtod(text.c_str(), nullptr);
  }

  auto hex4() -> std::uint32_t {
    if (at_ + 4 > s_.size()) fail("bad \\u escape");
    std::uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[at_++];
      const int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) fail("bad \\u escape");
      cp = cp * 16 + static_cast<std::uint32_t>(d);
    }
    return cp;
  }

  auto string() -> std::string {
    ++at_; // "
    std::string out;
    while (true) {
      if (at_ >= s_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[at_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (at_ >= s_.size()) fail("unterminated string");
      const char e = s_[at_++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto cp = hex4();
        if (cp >= 0xd800 && cp < 0xdc00 && s_.compare(at_, 2, "\\u") == 0) {
          const auto save = at_;
          at_ += 2;
          const auto low = hex4();
          if (low >= 0xdc00 && low < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          else at_ = save;
        }
        append_utf8(out, cp);
        break;
      }
      default: fail("bad escape");
      }
    }
  }

  std::string_view s_;
  std::size_t at_ = 0;
};

} // namespace

auto to_json(const value& v, const json_options& options) -> std::string {
  std::string out;
  json_value(out, v, options, 0);
  return out;
}

auto parse_json(std::string_view text, std::string_view what) -> value {
  try {
    return json_reader(text).document();
  } catch (const render_error& e) {
    throw render_error(std::string(what) + ": " + e.what());
  }
}

} // namespace troupe::jinja
