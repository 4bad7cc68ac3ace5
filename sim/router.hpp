#pragma once
// The routing seam: which replica a request goes to. Round robin for now;
// the router issue brings the routing policies (policies/routing/), which
// will plug in here, given each replica's load.

#include "sim/workload.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

namespace troupe::sim {

/// A replica's load when a request is routed.
struct replica_load {
  std::int64_t running = 0, waiting = 0;
  double kv_use = 0; ///< referenced blocks / blocks
};

class router {
public:
  virtual ~router() = default;
  /// The replica for `r`, an index into `replicas` (never empty).
  virtual auto route(const sim_request& r, std::span<const replica_load> replicas) -> std::size_t = 0;
};

class round_robin_router final : public router {
public:
  auto route(const sim_request&, std::span<const replica_load> replicas) -> std::size_t override {
    return next_++ % replicas.size();
  }

private:
  std::size_t next_ = 0;
};

/// The router a scenario names (scenario.routing); known: round_robin.
inline auto make_router(std::string_view name) -> std::unique_ptr<router> {
  (void)name; // the scenario reader admits round_robin only, for now
  return std::make_unique<round_robin_router>();
}

} // namespace troupe::sim
