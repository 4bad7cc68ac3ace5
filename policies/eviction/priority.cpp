#include "policies/eviction/priority.hpp"

namespace troupe::policy {

auto priority_eviction::key(const block_view& b) const -> eviction_key {
  return {b.priority, static_cast<std::int64_t>(b.last_used_tick)};
}

} // namespace troupe::policy
