#include "engine/cpu/local_all_reduce.hpp"

#include "base/check.hpp"

#include <algorithm>

namespace troupe {

local_all_reduce_group::local_all_reduce_group(int world)
  : barrier_(world), buffers_(static_cast<std::size_t>(world), nullptr) {
  TROUPE_CHECK(world >= 1, "an all-reduce group needs a rank");
  for (int r = 0; r < world; ++r) members_.push_back(std::make_unique<member_impl>(*this, r));
}

auto local_all_reduce_group::member(int rank) -> all_reduce& {
  TROUPE_CHECK(rank >= 0 && rank < static_cast<int>(members_.size()), "no such rank in the group");
  return *members_[static_cast<std::size_t>(rank)];
}

void local_all_reduce_group::sum(int rank, float* data, std::int64_t n) {
  buffers_[static_cast<std::size_t>(rank)] = data;
  barrier_.arrive_and_wait(); // every rank's partial sum is in place
  if (rank == 0) {
    // One rank adds them in rank order: every rank gets bit-identical sums.
    total_.assign(data, data + n);
    for (std::size_t r = 1; r < buffers_.size(); ++r) {
      const float* b = buffers_[r];
      for (std::int64_t i = 0; i < n; ++i) total_[static_cast<std::size_t>(i)] += b[i];
    }
  }
  barrier_.arrive_and_wait(); // the total is ready
  std::copy(total_.begin(), total_.begin() + n, data);
  barrier_.arrive_and_wait(); // nobody reuses buffers_ or total_ before all have copied
}

} // namespace troupe
