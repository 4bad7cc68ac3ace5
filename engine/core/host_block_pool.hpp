#pragma once
// Swap space: KV blocks in host memory that hold the cache of requests
// preempted by swap (vLLM's CPU blocks), named [first_id, first_id + n).
// All-or-nothing allocation from a stack; deterministic.

#include "base/check.hpp"
#include "base/types.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace troupe {

class host_block_pool {
public:
  explicit host_block_pool(std::int32_t num_blocks = 0, block_id first_id = 0) : capacity_(num_blocks) {
    TROUPE_CHECK(num_blocks >= 0 && first_id >= 0, "bad host block range");
    free_.reserve(static_cast<std::size_t>(num_blocks));
    for (block_id b = first_id + num_blocks; b-- > first_id;) free_.push_back(b);
  }

  /// n blocks, or nullopt (nothing taken) when fewer are free.
  [[nodiscard]] auto allocate(std::int64_t n) -> std::optional<std::vector<block_id>> {
    if (n < 0 || n > num_free()) return std::nullopt;
    std::vector<block_id> out(free_.end() - n, free_.end());
    free_.resize(free_.size() - static_cast<std::size_t>(n));
    return out;
  }
  void release(std::span<const block_id> blocks) { free_.insert(free_.end(), blocks.begin(), blocks.end()); }

  auto capacity() const -> std::int64_t { return capacity_; }
  auto num_free() const -> std::int64_t { return static_cast<std::int64_t>(free_.size()); }

private:
  std::int64_t capacity_;
  std::vector<block_id> free_;
};

} // namespace troupe
