#include "actors/router_actor.hpp"

#include "engine/router_core.hpp"
#include "policies/registry.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <memory>

namespace troupe {
namespace {

struct router_state {
  std::unique_ptr<router_core> core;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

auto router(router_actor::stateful_pointer<router_state> self, std::string policy, std::size_t replicas,
            std::vector<double> weights) -> router_actor::behavior_type {
  self->state.core = std::make_unique<router_core>(policy::make_routing_policy(policy), replicas, std::move(weights));
  return {
      [self](route_atom, const policy::route_request& q, const std::vector<std::int32_t>& cached) -> std::int32_t {
        auto& st = self->state;
        const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
        const auto i = st.core->route(q, now, cached);
        return i == policy::no_replica ? -1 : static_cast<std::int32_t>(i);
      },
      [self](load_atom, std::int32_t replica, const replica_report& r) {
        auto& core = *self->state.core;
        if (replica >= 0 && static_cast<std::size_t>(replica) < core.num_replicas())
          core.report(static_cast<std::size_t>(replica), r);
      },
  };
}

} // namespace

auto spawn_router(caf::actor_system& sys, const std::string& policy, std::size_t replicas,
                  std::vector<double> weights) -> router_actor {
  return sys.spawn(router, policy, replicas, std::move(weights));
}

} // namespace troupe
