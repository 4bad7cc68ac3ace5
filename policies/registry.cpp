#include "policies/registry.hpp"

#include "policies/loader.hpp"

#include "policies/autoscaling/builtin.hpp"
#include "policies/eviction/lfu.hpp"
#include "policies/eviction/lru.hpp"
#include "policies/eviction/priority.hpp"
#include "policies/routing/affinity.hpp"
#include "policies/routing/basic.hpp"
#include "policies/scheduling/fcfs.hpp"
#include "policies/scheduling/priority.hpp"
#include "policies/scheduling/sjf.hpp"
#include "policies/scheduling/static_batching.hpp"
#include "policies/scheduling/vtc.hpp"

#include <functional>
#include <stdexcept>
#include <utility>

namespace troupe::policy {
namespace {

template <class Base>
using factory = std::pair<const char*, std::function<std::unique_ptr<Base>()>>;

auto eviction_policies() -> const std::vector<factory<eviction_policy>>& {
  static const std::vector<factory<eviction_policy>> all{
      {"lru", [] { return std::make_unique<lru_eviction>(); }},
      {"lfu", [] { return std::make_unique<lfu_eviction>(); }},
      {"priority", [] { return std::make_unique<priority_eviction>(); }},
  };
  return all;
}

auto scheduling_policies() -> const std::vector<factory<scheduling_policy>>& {
  static const std::vector<factory<scheduling_policy>> all{
      {"fcfs", [] { return std::make_unique<fcfs_scheduling>(); }},
      {"priority", [] { return std::make_unique<priority_scheduling>(); }},
      {"sjf", [] { return std::make_unique<sjf_scheduling>(); }},
      {"vtc", [] { return std::make_unique<vtc_scheduling>(); }},
      {"static", [] { return std::make_unique<static_scheduling>(); }},
  };
  return all;
}

auto routing_policies() -> const std::vector<factory<routing_policy>>& {
  static const std::vector<factory<routing_policy>> all{
      {"round_robin", [] { return std::make_unique<round_robin_routing>(); }},
      {"least_requests", [] { return std::make_unique<least_requests_routing>(); }},
      {"least_tokens", [] { return std::make_unique<least_tokens_routing>(); }},
      {"consistent_hash", [] { return std::make_unique<consistent_hash_routing>(); }},
      {"prefix_affinity", [] { return std::make_unique<prefix_affinity_routing>(); }},
      {"weighted", [] { return std::make_unique<weighted_routing>(); }},
  };
  return all;
}

auto autoscaling_policies() -> const std::vector<factory<autoscaling_policy>>& {
  static const std::vector<factory<autoscaling_policy>> all{
      {"queue_depth", [] { return std::make_unique<queue_depth_autoscaling>(); }},
      {"ttft_slo", [] { return std::make_unique<ttft_slo_autoscaling>(); }},
      {"tokens_per_second", [] { return std::make_unique<tokens_per_second_autoscaling>(); }},
  };
  return all;
}

template <class Base>
auto names_of(const std::vector<factory<Base>>& all) -> std::vector<std::string> {
  std::vector<std::string> out;
  for (const auto& [name, make] : all) out.emplace_back(name);
  return out;
}

template <class Base>
auto make(const std::vector<factory<Base>>& all, std::string_view kind, std::string_view name)
    -> std::unique_ptr<Base> {
  for (const auto& [n, f] : all)
    if (name == n) return f();
  std::string known;
  for (const auto& n : names_of(all)) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown " + std::string(kind) + " policy '" + std::string(name) + "' (known: " + known + ")");
}

} // namespace

auto scheduling_policy_names() -> std::vector<std::string> { return names_of(scheduling_policies()); }

auto make_scheduling_policy(std::string_view name) -> std::unique_ptr<scheduling_policy> {
  if (names_a_library(std::string(name))) return load_scheduling_policy(std::string(name));
  return make(scheduling_policies(), "scheduling", name);
}

auto eviction_policy_names() -> std::vector<std::string> { return names_of(eviction_policies()); }

auto make_eviction_policy(std::string_view name) -> std::unique_ptr<eviction_policy> {
  if (names_a_library(std::string(name))) return load_eviction_policy(std::string(name));
  return make(eviction_policies(), "eviction", name);
}

auto routing_policy_names() -> std::vector<std::string> { return names_of(routing_policies()); }

auto make_routing_policy(std::string_view name) -> std::unique_ptr<routing_policy> {
  if (names_a_library(std::string(name))) return load_routing_policy(std::string(name));
  return make(routing_policies(), "routing", name);
}

auto autoscaling_policy_names() -> std::vector<std::string> { return names_of(autoscaling_policies()); }

auto make_autoscaling_policy(std::string_view name, double target) -> std::unique_ptr<autoscaling_policy> {
  if (target <= 0) return make(autoscaling_policies(), "autoscaling", name);
  if (name == "queue_depth") return std::make_unique<queue_depth_autoscaling>(target);
  if (name == "ttft_slo") return std::make_unique<ttft_slo_autoscaling>(target);
  if (name == "tokens_per_second") return std::make_unique<tokens_per_second_autoscaling>(target);
  return make(autoscaling_policies(), "autoscaling", name);
}

} // namespace troupe::policy
