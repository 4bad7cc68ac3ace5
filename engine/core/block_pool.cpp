#include "engine/core/block_pool.hpp"

#include "engine/check.hpp"

#include <algorithm>
#include <numeric>

namespace troupe {

block_pool::block_pool(std::vector<block_id> blocks)
  : free_(std::move(blocks)), num_total_(static_cast<std::int64_t>(free_.size())) {
  // Reversed so that take() hands out the given order front first.
  std::reverse(free_.begin(), free_.end());
}

auto block_pool::of_size(std::int32_t num_blocks) -> block_pool {
  std::vector<block_id> ids(static_cast<std::size_t>(std::max(num_blocks, 0)));
  std::iota(ids.begin(), ids.end(), 0);
  return block_pool(std::move(ids));
}

auto block_pool::take(std::int64_t n) -> std::optional<std::vector<block_id>> {
  TROUPE_CHECK(n >= 0, "negative block count");
  if (n > num_free()) return std::nullopt;
  std::vector<block_id> out(free_.end() - n, free_.end());
  std::reverse(out.begin(), out.end());
  free_.resize(free_.size() - static_cast<std::size_t>(n));
  return out;
}

void block_pool::give_back(std::span<const block_id> blocks) {
  TROUPE_CHECK(num_free() + static_cast<std::int64_t>(blocks.size()) <= num_total_,
               "more blocks returned than the pool lent");
  free_.insert(free_.end(), blocks.rbegin(), blocks.rend());
}

void block_pool::add(std::span<const block_id> blocks) {
  free_.insert(free_.end(), blocks.rbegin(), blocks.rend());
  num_total_ += static_cast<std::int64_t>(blocks.size());
}

} // namespace troupe
