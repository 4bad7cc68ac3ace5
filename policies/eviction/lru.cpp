#include "policies/eviction/lru.hpp"

namespace troupe::policy {

// Within one release, deeper blocks first: a chain's tail is worth less than
// its head, which every longer match needs.
auto lru_eviction::key(const block_view& b) const -> eviction_key {
  return {static_cast<std::int64_t>(b.last_used_tick), -static_cast<std::int64_t>(b.depth)};
}

} // namespace troupe::policy
