#pragma once
// The server config's keys, one table (server_config_keys.cpp): each key's
// section, how it is read and written back (from server_config{}'s field),
// and its description for `troupe config`. Internal to the config reader.

#include "service/server_config.hpp"
#include "settings/toml_settings.hpp"

#include <toml++/toml.h>

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::config_keys {

// config_error("<where>: <reason>"), config_error("<path>: expected X, got Y").
using settings::fail;
using settings::wrong_type;

/// Checks a TOML value and stores it in its field; throws config_error naming `path`.
using apply_fn = std::function<void(const toml::node&, const std::string& path, server_config&)>;
/// The field's value as TOML text that `apply` reads back ("8080", "\"cpu\"", "[\"cpu\"]").
using render_fn = std::function<std::string(const server_config&)>;

/// How one key is read and written; each helper below makes both from one field.
struct key_io {
  apply_fn apply;
  render_fn render;
  bool takes_string = false; ///< string-valued: an override's text is always the plain string
};

struct key_spec {
  std::string_view section;
  std::string_view key;
  key_io io;
  /// What the key does, for `troupe config`: one line, or several split at
  /// '\n' (an example's lines start with two spaces).
  std::string description;
};

/// Every section in the file's order, with a comment on its header.
struct section_spec {
  std::string_view name;
  std::string_view description;
};
inline constexpr std::array k_sections = {
    section_spec{"server", "HTTP: the OpenAI-compatible API, WebSockets, health, metrics"},
    section_spec{"model", "what is served"},
    section_spec{"engine", "how a model runs: executor, devices, replicas"},
    section_spec{"scheduler", "per replica: batches, KV cache, queue limits"},
    section_spec{"router", "which replica takes a request; health checks; remote workers"},
    section_spec{"autoscaler", "sizes [model]'s replicas (CPU and zero executors); desired count and reason in /metrics"},
    section_spec{"actors", "the actor runtime (CAF)"},
};

/// Every key the file may hold, by section in k_sections' order: its
/// default is server_config{}'s, its description is here.
auto key_specs() -> const std::vector<key_spec>&;

} // namespace troupe::config_keys
