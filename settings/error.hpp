#pragma once
// The error of every settings file troupe reads (settings/toml_settings.hpp);
// config_error and sim::scenario_error are this type.

#include <stdexcept>

namespace troupe::settings {

/// "<key path>: <problem>", "<file>: line L, column C: <TOML error>" or
/// "<file>: cannot read".
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

} // namespace troupe::settings
