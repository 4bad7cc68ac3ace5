#include "settings/toml_settings.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <system_error>

namespace troupe::settings {
namespace {

struct size_unit {
  std::string_view name;
  std::int64_t bytes;
};

constexpr std::array k_size_units = {
    size_unit{"", 1},
    size_unit{"B", 1},
    size_unit{"KB", 1'000},
    size_unit{"MB", 1'000'000},
    size_unit{"GB", 1'000'000'000},
    size_unit{"TB", 1'000'000'000'000},
    size_unit{"KiB", std::int64_t{1} << 10},
    size_unit{"MiB", std::int64_t{1} << 20},
    size_unit{"GiB", std::int64_t{1} << 30},
    size_unit{"TiB", std::int64_t{1} << 40},
};

auto trimmed(std::string_view s) -> std::string_view {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

} // namespace

void fail(const std::string& path, std::string_view reason) { throw error(path + ": " + std::string(reason)); }

auto type_name(const toml::node& n) -> std::string {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

void wrong_type(const std::string& path, std::string_view expected, const toml::node& n) {
  fail(path, "expected " + std::string(expected) + ", got " + type_name(n));
}

auto read_file(const std::filesystem::path& path) -> std::string {
  std::error_code ec;
  auto in = std::ifstream(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in) throw error(path.string() + ": cannot read");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

auto parse(std::string_view text, std::string_view origin) -> toml::table {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw error(std::string(origin) + ": line " + std::to_string(at.line) + ", column " + std::to_string(at.column) +
                ": " + std::string(e.description()));
  }
}

auto integer(const toml::node& n, const std::string& path, std::int64_t lo, std::optional<std::int64_t> hi)
    -> std::int64_t {
  if (!n.is_integer()) wrong_type(path, "an integer", n);
  return in_range<std::int64_t>(n.as_integer()->get(), path, lo, hi);
}

auto number(const toml::node& n, const std::string& path, double lo, bool lo_open) -> double {
  if (!n.is_number()) wrong_type(path, "a number", n);
  // Not node::value<double>(), which refuses integers a double cannot hold exactly.
  const double v = n.is_integer() ? static_cast<double>(n.as_integer()->get()) : n.as_floating_point()->get();
  if (!(v >= lo) || (lo_open && v == lo))
    fail(path, std::string("must be ") + (lo_open ? "> " : ">= ") + show_number(lo) + ", got " + show_number(v));
  if (!std::isfinite(v)) fail(path, "must be finite, got " + show_number(v));
  return v;
}

auto boolean(const toml::node& n, const std::string& path) -> bool {
  if (!n.is_boolean()) wrong_type(path, "a boolean", n);
  return n.as_boolean()->get();
}

auto string(const toml::node& n, const std::string& path) -> const std::string& {
  if (!n.is_string()) wrong_type(path, "a string", n);
  return n.as_string()->get();
}

void one_of(const std::string& value, const std::vector<std::string>& known, const std::string& path,
            std::string_view what) {
  if (std::find(known.begin(), known.end(), value) == known.end())
    fail(path, "unknown " + std::string(what) + " \"" + value + "\"; known: " + joined(known));
}

auto table_reader::at(std::string_view key) -> const toml::node* {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  return t_.get(key);
}

auto table_reader::path(std::string_view key) const -> std::string {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void table_reader::number(std::string_view key, double& out, double lo, bool lo_open) {
  if (const auto* n = at(key)) out = settings::number(*n, path(key), lo, lo_open);
}

void table_reader::boolean(std::string_view key, bool& out) {
  if (const auto* n = at(key)) out = settings::boolean(*n, path(key));
}

void table_reader::text(std::string_view key, std::string& out, const std::vector<std::string>& allowed) {
  const auto* n = at(key);
  if (n == nullptr) return;
  const auto& s = settings::string(*n, path(key));
  if (!allowed.empty()) one_of(s, allowed, path(key));
  out = s;
}

auto table_reader::table(std::string_view key) -> std::optional<table_reader> {
  const auto* n = at(key);
  if (n == nullptr) return std::nullopt;
  if (!n->is_table()) wrong_type(path(key), "a table", *n);
  return table_reader(*n->as_table(), path(key));
}

void table_reader::finish() const {
  for (const auto& [k, v] : t_) {
    (void)v;
    if (std::find(known_.begin(), known_.end(), k.str()) == known_.end())
      fail(path(k.str()), "unknown key; known: " + joined(known_));
  }
}

auto override_value(const std::string& text, bool want_string) -> toml::table {
  try {
    auto doc = toml::parse("v = " + text);
    // Not text that smuggles in more keys; for a string key, a TOML string.
    if (const auto* v = doc.get("v"); doc.size() == 1 && v != nullptr && (!want_string || v->is_string())) return doc;
  } catch (const toml::parse_error&) {
  }
  toml::table t;
  t.insert("v", text);
  return t;
}

void set_path(toml::table& root, std::string_view path, const toml::node& value, const std::string& origin) {
  const auto dot = path.find('.');
  const auto head = std::string(path.substr(0, dot));
  if (head.empty() || dot == path.size() - 1) fail(std::string(path), "not a key path like section.key (" + origin + ")");
  if (dot == std::string_view::npos) {
    root.insert_or_assign(head, value);
    return;
  }
  const auto rest = path.substr(dot + 1);
  auto* n = root.get(head);
  if (n == nullptr) {
    root.insert(head, toml::table{});
    n = root.get(head);
  }
  if (n->is_table()) {
    set_path(*n->as_table(), rest, value, origin);
  } else if (n->is_array_of_tables()) {
    for (auto& e : *n->as_array()) set_path(*e.as_table(), rest, value, origin);
  } else {
    fail(head, "is " + type_name(*n) + ", so " + std::string(path) + " cannot be set (" + origin + ")");
  }
}

auto show_number(double v) -> std::string {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

auto toml_quoted(std::string_view s) -> std::string {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          std::array<char, 8> esc{};
          std::snprintf(esc.data(), esc.size(), "\\u%04x", u);
          out += esc.data();
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

auto toml_float(double v) -> std::string {
  auto s = show_number(v);
  // A TOML float needs a fraction or an exponent: "30" would read as an integer.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

auto parse_byte_size(std::string_view text, const std::string& path) -> std::int64_t {
  const auto bad = [&] {
    return error(path + ": cannot read \"" + std::string(text) +
                 "\" as a size: an integer with an optional unit B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  };
  const auto s = trimmed(text);
  if (s.empty() || s.front() < '0' || s.front() > '9') throw bad();
  std::int64_t count = 0;
  const auto [rest, ec] = std::from_chars(s.data(), s.data() + s.size(), count);
  if (ec != std::errc{}) throw bad();
  const auto suffix = trimmed(s.substr(static_cast<std::size_t>(rest - s.data())));
  for (const auto& u : k_size_units) {
    if (u.name != suffix) continue;
    if (count > std::numeric_limits<std::int64_t>::max() / u.bytes)
      throw error(path + ": \"" + std::string(text) + "\" is too large");
    return count * u.bytes;
  }
  throw bad();
}

auto toml_byte_size(std::int64_t bytes) -> std::string {
  if (bytes == 0) return "0";
  for (auto u = k_size_units.rbegin(); u != k_size_units.rend() && u->name.ends_with("iB"); ++u)
    if (bytes % u->bytes == 0) return "\"" + std::to_string(bytes / u->bytes) + std::string(u->name) + "\"";
  return std::to_string(bytes);
}

} // namespace troupe::settings
