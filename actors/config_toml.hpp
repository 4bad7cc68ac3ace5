#pragma once
// What every TOML file troupe reads (the server's config, the tenants file)
// shares: reading it, parsing it with errors as one-line config_errors, and
// the type names of "expected X, got Y". Implemented in server_config.cpp.

#include "actors/server_config.hpp"

#include <toml++/toml.h>

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

} // namespace troupe
