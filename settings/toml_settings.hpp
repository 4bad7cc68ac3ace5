#pragma once
// The one layer that reads troupe's TOML files: the server's config, the
// tenants file and the simulator's scenarios. Every error is one line that
// names the key path ("scheduler.max_num_seqs: must be >= 1, got 0"), every
// table is checked for keys nobody asked for, and `--set key.path=value`
// overrides are applied here. Plain C++ over toml++.

#include "settings/error.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::settings {

/// Throws error("<path>: <reason>").
[[noreturn]] void fail(const std::string& path, std::string_view reason);
/// "string", "integer", "float", "boolean", "array", "table", "date", ...
auto type_name(const toml::node& n) -> std::string;
/// Throws error("<path>: expected <expected>, got <n's type>").
[[noreturn]] void wrong_type(const std::string& path, std::string_view expected, const toml::node& n);

/// The file's text; error "<path>: cannot read".
auto read_file(const std::filesystem::path& path) -> std::string;
/// The parsed document; error "<origin>: line L, column C: <reason>".
auto parse(std::string_view text, std::string_view origin) -> toml::table;

// One value, checked; each error names `path`.

/// v, unless it lies outside [lo, hi] ("must be >= lo, got v" without hi,
/// "must be in [lo, hi], got v" with) or past what Int holds ("must be <= max").
template <class Int>
auto in_range(std::int64_t v, const std::string& path, std::int64_t lo, std::optional<std::int64_t> hi = std::nullopt)
    -> Int {
  if (hi) {
    if (v < lo || v > *hi)
      fail(path, "must be in [" + std::to_string(lo) + ", " + std::to_string(*hi) + "], got " + std::to_string(v));
  } else if (v < lo) {
    fail(path, "must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  }
  if constexpr (sizeof(Int) < sizeof(std::int64_t)) {
    constexpr auto max = std::int64_t{std::numeric_limits<Int>::max()};
    if (v > max) fail(path, "must be <= " + std::to_string(max) + ", got " + std::to_string(v));
  }
  return static_cast<Int>(v);
}
/// An integer (in_range's bounds).
auto integer(const toml::node& n, const std::string& path, std::int64_t lo,
             std::optional<std::int64_t> hi = std::nullopt) -> std::int64_t;
/// An integer that fits Int too.
template <class Int>
auto integer_of(const toml::node& n, const std::string& path, std::int64_t lo,
                std::optional<std::int64_t> hi = std::nullopt) -> Int {
  return in_range<Int>(integer(n, path, lo, hi), path, lo, hi);
}
/// A number (an integer is taken too); finite, and >= lo (> lo where lo_open).
auto number(const toml::node& n, const std::string& path, double lo = -INFINITY, bool lo_open = false) -> double;
auto boolean(const toml::node& n, const std::string& path) -> bool;
auto string(const toml::node& n, const std::string& path) -> const std::string&;
/// One of `known`: "unknown <what> \"x\"; known: a, b".
void one_of(const std::string& value, const std::vector<std::string>& known, const std::string& path,
            std::string_view what = "value");

/// One table being read: typed fields with the key path in every error, and
/// at the end (finish) a check that it held no key nobody asked for.
class table_reader {
public:
  table_reader(const toml::table& t, std::string path) : t_(t), path_(std::move(path)) {}

  /// The key's node (or nullptr), marking it known.
  auto at(std::string_view key) -> const toml::node*;
  auto path(std::string_view key) const -> std::string;

  template <class Int>
  void integer(std::string_view key, Int& out, std::int64_t lo, std::optional<std::int64_t> hi = std::nullopt) {
    if (const auto* n = at(key)) out = integer_of<Int>(*n, path(key), lo, hi);
  }
  void number(std::string_view key, double& out, double lo, bool lo_open = false);
  void boolean(std::string_view key, bool& out);
  /// A string; one of `allowed` where it is not empty.
  void text(std::string_view key, std::string& out, const std::vector<std::string>& allowed = {});
  /// A sub-table, or nullopt when absent.
  auto table(std::string_view key) -> std::optional<table_reader>;
  /// An array of tables ([[key]]), each read by f(table_reader&, index) and finished.
  template <class F>
  auto tables(std::string_view key, F f) -> bool {
    const auto* n = at(key);
    if (n == nullptr) return false;
    if (!n->is_array_of_tables() || n->as_array()->empty())
      fail(path(key), "expected one or more [[" + std::string(key) + "]] tables, got " + type_name(*n));
    std::size_t i = 0;
    for (const auto& e : *n->as_array()) {
      table_reader r(*e.as_table(), path(key) + "[" + std::to_string(i) + "]");
      f(r, i++);
      r.finish();
    }
    return true;
  }
  /// Throws "<path>.<key>: unknown key; known: ..." for a key nobody read.
  void finish() const;

private:
  const toml::table& t_;
  std::string path_;
  std::vector<std::string> known_;
};

// --set overrides.

/// An override's text as a TOML value (the right-hand side of one key), in
/// the table's key "v"; text that is not one (a bare word, a path), or where
/// `want_string` is not a TOML string, is the plain string.
auto override_value(const std::string& text, bool want_string = false) -> toml::table;
/// Sets `value` at the dotted key path in `root`, creating tables on the
/// way; in an array of tables ([[replicas]]) it is set in every element.
/// `origin` ("--set scheduler.policy") is named in an error.
void set_path(toml::table& root, std::string_view path, const toml::node& value, const std::string& origin);

// Values written back as TOML text, and shown in messages.

/// The shortest text that reads back as v ("0.5", "30", "1e+300", "inf").
auto show_number(double v) -> std::string;
/// s as a TOML basic string: quoted, with `"`, `\` and control characters escaped.
auto toml_quoted(std::string_view s) -> std::string;
/// v as a TOML float that reads back exactly: "30.0", "0.25", "1e+300", "inf".
auto toml_float(double v) -> std::string;
/// "512MiB", "4GB", "100 MB", "1024": a count of bytes, exact (no fractions);
/// error "<path>: cannot read ..." otherwise, or "... is too large".
auto parse_byte_size(std::string_view text, const std::string& path) -> std::int64_t;
/// bytes as parse_byte_size reads it: "\"256MiB\"" in the largest binary unit
/// that divides it exactly, else the plain integer ("0", "1000").
auto toml_byte_size(std::int64_t bytes) -> std::string;
/// "a, b, c".
template <class Range>
auto joined(const Range& names) -> std::string {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

} // namespace troupe::settings
