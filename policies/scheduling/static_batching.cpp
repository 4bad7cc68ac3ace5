#include "policies/scheduling/static_batching.hpp"

namespace troupe::policy {

auto static_scheduling::admission_order(const schedule_view& v) -> std::vector<std::size_t> {
  // The batch may still be forming over several steps (prompts chunked
  // under the token budget): open while none of it has produced a token.
  for (const auto& r : v.running)
    if (r.num_output_tokens > 0) return {};
  return arrival_order(v);
}

auto static_scheduling::preemption_victim(const schedule_view& v) -> std::size_t { return v.running.size() - 1; }

} // namespace troupe::policy
