#pragma once
// Every built-in policy, registered by name in one function per kind (no
// static self-registration: linkers drop it).

#include "policies/api/autoscaling.hpp"
#include "policies/api/eviction.hpp"
#include "policies/api/routing.hpp"
#include "policies/api/scheduling.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::policy {

/// "fcfs", "priority", "sjf", "vtc", "static".
auto scheduling_policy_names() -> std::vector<std::string>;

/// A fresh instance of the built-in scheduling policy `name` (policies may
/// keep state: one per scheduler), or of the out-of-tree one a path names
/// (policies/api/plugin.hpp); throws std::invalid_argument with one line
/// listing the known names, or saying why the library was refused.
auto make_scheduling_policy(std::string_view name) -> std::unique_ptr<scheduling_policy>;

/// "lru", "lfu", "priority".
auto eviction_policy_names() -> std::vector<std::string>;

/// The built-in eviction policy `name`, or a library's by path; throws
/// std::invalid_argument with one line otherwise.
auto make_eviction_policy(std::string_view name) -> std::unique_ptr<eviction_policy>;

/// "round_robin", "least_requests", "least_tokens", "consistent_hash",
/// "prefix_affinity", "weighted".
auto routing_policy_names() -> std::vector<std::string>;

/// A fresh instance of the built-in routing policy `name`, or of the one a
/// shared object exports when `name` is a path (policies keep state: one per
/// router); throws std::invalid_argument with one line listing the known
/// names.
auto make_routing_policy(std::string_view name) -> std::unique_ptr<routing_policy>;

/// "queue_depth", "ttft_slo", "tokens_per_second".
auto autoscaling_policy_names() -> std::vector<std::string>;

/// The built-in autoscaling policy `name` with its target (requests per
/// replica, TTFT seconds, or tokens per second per replica; <= 0: the
/// policy's default); throws std::invalid_argument with one line listing the
/// known names.
auto make_autoscaling_policy(std::string_view name, double target = 0) -> std::unique_ptr<autoscaling_policy>;

} // namespace troupe::policy
