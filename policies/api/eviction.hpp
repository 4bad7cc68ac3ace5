#pragma once
// The eviction policy kind: which cached, unreferenced KV block goes first
// when the pool needs a free one. A policy only scores blocks; the pool
// (engine/core/prefix_cache) owns them and keeps its invariants. Plain C++:
// no clock (time is a logical tick), no randomness.

#include "policies/api/abi.hpp"

#include <cstdint>
#include <memory>
#include <string_view>

namespace troupe::policy {

/// What a policy may know of an evictable block.
struct block_view {
  std::int32_t id = 0;
  std::uint64_t last_used_tick = 0; ///< the pool's logical clock when it was last referenced
  std::uint64_t num_hits = 0;       ///< times a request found it in the prefix cache
  std::int32_t priority = 0;        ///< highest priority of the requests that used it (larger: more important)
  std::int32_t depth = 0;           ///< its index in its prefix chain (0: a prompt's first block)
};

/// Smaller keys are evicted first; ties go to the lower block id.
struct eviction_key {
  std::int64_t primary = 0;
  std::int64_t secondary = 0;
  friend auto operator<=>(const eviction_key&, const eviction_key&) = default;
};

class eviction_policy {
public:
  virtual ~eviction_policy() = default;
  virtual auto name() const -> std::string_view = 0;
  /// The block's key at the moment it becomes evictable (no request holds it).
  virtual auto key(const block_view& b) const -> eviction_key = 0;
};

} // namespace troupe::policy
