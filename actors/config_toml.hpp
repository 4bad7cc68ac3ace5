#pragma once
// What every TOML file troupe reads (the server's config, the tenants file)
// shares: reading it, parsing it with errors as one-line config_errors, the
// type names of "expected X, got Y", and writing values back as TOML text.

#include "actors/server_config.hpp"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace troupe {

/// The file's text; config_error "<path>: cannot read".
auto read_config_file(const std::filesystem::path& path) -> std::string;
/// The parsed table; config_error "<origin>: line L, column C: <reason>".
auto parse_toml(std::string_view text, std::string_view origin) -> toml::table;
/// "string", "integer", "float", "boolean", "array", "table", "date", ...
auto toml_type_name(const toml::node& n) -> std::string;

/// "512MiB", "4GB", "100 MB", "1024": a count of bytes, exact (no fractions).
/// config_error "<path>: cannot read ..." otherwise, or "... is too large".
auto parse_byte_size(std::string_view text, const std::string& path) -> std::int64_t;

/// The shortest text that reads back as v ("0.5", "30", "1e+300", "inf"):
/// for messages like "got 0.5".
auto show_number(double v) -> std::string;

/// s as a TOML basic string: quoted, with `"`, `\` and control characters escaped.
auto toml_quoted(std::string_view s) -> std::string;
/// v as a TOML float that reads back exactly: "30.0", "0.25", "1e+300", "inf".
auto toml_float(double v) -> std::string;
/// bytes as parse_byte_size reads it: "\"256MiB\"" in the largest binary unit
/// that divides it exactly, else the plain integer ("0", "1000").
auto toml_byte_size(std::int64_t bytes) -> std::string;

} // namespace troupe
