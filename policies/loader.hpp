#pragma once
// Loads a policy built out of tree (policies/api/plugin.hpp) from a shared
// object. The library stays loaded for the life of the process.

#include "policies/api/eviction.hpp"
#include "policies/api/routing.hpp"
#include "policies/api/scheduling.hpp"

#include <memory>
#include <string>

namespace troupe::policy {

/// Throws std::invalid_argument with one line naming the path when the file
/// cannot be loaded, lacks the entry points, or was built against another
/// policy ABI version.
auto load_scheduling_policy(const std::string& path) -> std::unique_ptr<scheduling_policy>;
auto load_eviction_policy(const std::string& path) -> std::unique_ptr<eviction_policy>;
auto load_routing_policy(const std::string& path) -> std::unique_ptr<routing_policy>;

/// A policy name that is a path to a shared object ("/x/lib.so", "./lib.so").
auto names_a_library(const std::string& name) -> bool;

} // namespace troupe::policy
