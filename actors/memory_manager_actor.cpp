#include "actors/memory_manager_actor.hpp"

#include "engine/core/block_pool.hpp"

#include <caf/all.hpp>

namespace troupe {
namespace {

struct memory_manager_state {
  block_pool pool;
};

auto memory_manager(memory_manager_actor::stateful_pointer<memory_manager_state> self,
                    std::int32_t num_blocks) -> memory_manager_actor::behavior_type {
  self->state.pool = block_pool::of_size(num_blocks);
  return {
      [self](lease_atom, std::int32_t n) -> std::vector<block_id> {
        auto& pool = self->state.pool;
        return *pool.take(std::min<std::int64_t>(n, pool.num_free()));
      },
      [self](release_atom, const std::vector<block_id>& blocks) { self->state.pool.give_back(blocks); },
  };
}

} // namespace

auto spawn_memory_manager(caf::actor_system& sys, std::int32_t num_blocks) -> memory_manager_actor {
  return sys.spawn(memory_manager, num_blocks);
}

} // namespace troupe
