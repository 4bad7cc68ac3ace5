#pragma once
// A set of free KV blocks. The memory manager owns one over a device's whole
// cache; each replica scheduler owns one over the blocks it has leased.

#include "engine/types.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace troupe {

class block_pool {
public:
  block_pool() = default;
  /// A pool holding `blocks` (distinct ids), all free.
  explicit block_pool(std::vector<block_id> blocks);
  /// A pool over ids [0, num_blocks), all free.
  static auto of_size(std::int32_t num_blocks) -> block_pool;

  /// `n` free blocks, lowest-numbered last freed first; nullopt (and nothing
  /// taken) when fewer than `n` are free. O(n).
  [[nodiscard]] auto take(std::int64_t n) -> std::optional<std::vector<block_id>>;
  /// Returns blocks taken from this pool (or added to it). O(n).
  void give_back(std::span<const block_id> blocks);
  /// Adds blocks the pool did not hold before (a lease growing).
  void add(std::span<const block_id> blocks);

  auto num_free() const -> std::int64_t { return static_cast<std::int64_t>(free_.size()); }
  auto num_total() const -> std::int64_t { return num_total_; }
  auto num_used() const -> std::int64_t { return num_total_ - num_free(); }

private:
  std::vector<block_id> free_; ///< a stack: the most recently freed is reused first
  std::int64_t num_total_ = 0;
};

/// Blocks that hold `num_tokens` tokens at `block_size` tokens per block.
constexpr auto blocks_for(std::int64_t num_tokens, std::int64_t block_size) -> std::int64_t {
  return (num_tokens + block_size - 1) / block_size;
}

} // namespace troupe
