#pragma once
// Where `troupe serve`, `worker` and `config` get the server's settings: the
// built-in defaults, the keys of a file over them when --config FILE is
// given (none is read otherwise), then the command line's overrides.

#include "service/server_config.hpp"
#include "cli/args.hpp"

#include <filesystem>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace troupe::cli {

/// An option that sets one config key: `--port N` is server.port = N.
struct key_option {
  const char* option; ///< without the leading "--"
  const char* key;    ///< "section.key"
};

/// `troupe serve`'s: --port, --host, --scheduling, --step-log.
auto serve_key_options() -> std::span<const key_option>;

struct config_source {
  std::optional<std::filesystem::path> file; ///< --config FILE; none: no file is read
  std::vector<config_override> overrides;    ///< in order: the model dir, key options, then every --set

  /// The defaults, the file's keys, then the overrides; throws config_error.
  auto load() const -> server_config;
};

/// The options config_source_of reads: config, model, set, and `key_options`'.
auto config_options(std::span<const key_option> key_options) -> std::set<std::string>;

/// From `a` (parsed with config_options() and at most one positional
/// argument): --config FILE, the model directory as the positional argument
/// or --model DIR (a usage_error when both are given), each of
/// `key_options` given, then every --set KEY=VALUE (a later one wins).
auto config_source_of(const args& a, std::span<const key_option> key_options) -> config_source;

} // namespace troupe::cli
