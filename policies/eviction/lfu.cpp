#include "policies/eviction/lfu.hpp"

namespace troupe::policy {

auto lfu_eviction::key(const block_view& b) const -> eviction_key {
  return {static_cast<std::int64_t>(b.num_hits), static_cast<std::int64_t>(b.last_used_tick)};
}

} // namespace troupe::policy
