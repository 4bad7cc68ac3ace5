#include "actors/memory_manager_actor.hpp"

#include "engine/core/memory_manager.hpp"
#include "policies/registry.hpp"

#include <caf/all.hpp>

#include <memory>

namespace troupe {
namespace {

struct memory_manager_state {
  std::unique_ptr<policy::eviction_policy> eviction; // before core: it refers to it
  std::unique_ptr<memory_manager> core;
  server_metrics::device_series metrics{};
  std::uint64_t reported_queries = 0, reported_hits = 0;

  void publish() {
    const auto& c = core->cache();
    metrics.prefix_cache_queries->Increment(static_cast<double>(c.num_queries() - reported_queries));
    metrics.prefix_cache_hits->Increment(static_cast<double>(c.num_hits() - reported_hits));
    reported_queries = c.num_queries();
    reported_hits = c.num_hits();
  }
};

auto memory_manager_behavior(memory_manager_actor::stateful_pointer<memory_manager_state> self,
                             std::int32_t num_blocks, std::string eviction, server_metrics* metrics,
                             std::string device) -> memory_manager_actor::behavior_type {
  auto& st = self->state;
  st.eviction = policy::make_eviction_policy(eviction);
  st.core = std::make_unique<memory_manager>(num_blocks, *st.eviction);
  st.metrics = metrics->device(device);
  return {
      [self](lease_atom, std::int32_t n) -> std::vector<block_id> { return self->state.core->lease(n, 0); },
      [self](match_atom, std::uint64_t tenant, const std::vector<token_id>& tokens, std::int32_t block_size,
             std::int32_t priority) -> std::vector<block_id> {
        auto m = self->state.core->match(tenant, tokens, block_size, priority);
        self->state.publish();
        return m;
      },
      [self](apply_atom, const std::vector<block_op>& ops) { self->state.core->apply(ops); },
      [self](probe_atom, std::uint64_t tenant, const std::vector<token_id>& tokens, std::int32_t block_size) {
        return cached_prefix_blocks(self->state.core->cache(), tenant, tokens, block_size);
      },
  };
}

} // namespace

auto spawn_memory_manager(caf::actor_system& sys, std::int32_t num_blocks, const std::string& eviction,
                          server_metrics* metrics, const std::string& device) -> memory_manager_actor {
  return sys.spawn(memory_manager_behavior, num_blocks, eviction, metrics, device);
}

} // namespace troupe
