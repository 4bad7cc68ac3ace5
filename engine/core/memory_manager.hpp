#pragma once
// A device's KV memory (docs/architecture.md, Memory): the prefix cache over all of its
// blocks, leases of free blocks for the replica schedulers that run on it,
// and prefix matching, once per request at admission. The memory manager
// actor owns one; the simulator calls one directly. Deterministic.

#include "engine/core/prefix_cache.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

/// What a lease holder reports back, in batches: a block it filled and
/// published, a reference it drops, or one more it takes on a block its
/// requests hold at the manager (a fork).
struct block_op {
  enum class kind : std::uint8_t { publish, release, share };
  kind what = kind::release;
  block_id block = 0;
  block_key key;      ///< publish only
  block_hash hash = 0; ///< publish only
  std::int32_t depth = 0;
};

/// A prompt's cached prefix: its blocks, and the chain hash of the last
/// (0 when none), which the blocks published after them chain from.
struct prefix_match {
  std::vector<block_id> blocks;
  block_hash last_hash = 0;
};

/// The longest run of `tokens`' full blocks that `source` holds cached for
/// `tenant`, never the block of the last token (it must be computed to
/// sample), each referenced once. Hashes chain as in kv_cache_manager.
auto match_prefix(block_source& source, std::uint64_t tenant, std::span<const token_id> tokens,
                  std::int32_t block_size, std::int32_t priority) -> prefix_match;

/// How many of match_prefix()'s blocks `cache` holds now, taking nothing:
/// what a router weighs when it routes by cached prefix.
auto cached_prefix_blocks(const prefix_cache& cache, std::uint64_t tenant, std::span<const token_id> tokens,
                          std::int32_t block_size) -> std::int32_t;

class memory_manager {
public:
  /// Blocks [0, num_blocks). `eviction` must outlive the manager.
  memory_manager(std::int32_t num_blocks, const policy::eviction_policy& eviction);

  /// Up to n blocks for a lease (free first, then evicted from the cache),
  /// each referenced once by it; fewer when the rest are all referenced.
  auto lease(std::int32_t n, std::int32_t priority) -> std::vector<block_id>;
  /// match_prefix() on the device's cache.
  auto match(std::uint64_t tenant, std::span<const token_id> tokens, std::int32_t block_size,
             std::int32_t priority) -> std::vector<block_id>;
  /// Applies a lease holder's publishes and releases, in order.
  void apply(std::span<const block_op> ops);

  auto cache() const -> const prefix_cache& { return cache_; }
  /// The cache's unreferenced blocks forgotten (a replica stopped: what it cached goes).
  void drop_cached() { cache_.drop_cached(); }

private:
  prefix_cache cache_;
};

} // namespace troupe
