#include "actors/config_toml.hpp"

#include <array>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <system_error>

namespace troupe {
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

auto read_config_file(const std::filesystem::path& path) -> std::string {
  std::error_code ec;
  auto in = std::ifstream(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in) throw config_error(path.string() + ": cannot read");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

auto parse_toml(std::string_view text, std::string_view origin) -> toml::table {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw config_error(std::string(origin) + ": line " + std::to_string(at.line) + ", column " +
                       std::to_string(at.column) + ": " + std::string(e.description()));
  }
}

auto toml_type_name(const toml::node& n) -> std::string {
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

auto parse_byte_size(std::string_view text, const std::string& path) -> std::int64_t {
  const auto bad = [&] {
    return config_error(path + ": cannot read \"" + std::string(text) +
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
      throw config_error(path + ": \"" + std::string(text) + "\" is too large");
    return count * u.bytes;
  }
  throw bad();
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

auto toml_byte_size(std::int64_t bytes) -> std::string {
  if (bytes == 0) return "0";
  for (auto u = k_size_units.rbegin(); u != k_size_units.rend() && u->name.ends_with("iB"); ++u)
    if (bytes % u->bytes == 0) return "\"" + std::to_string(bytes / u->bytes) + std::string(u->name) + "\"";
  return std::to_string(bytes);
}

} // namespace troupe
