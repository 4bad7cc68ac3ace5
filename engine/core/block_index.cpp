#include "engine/core/block_index.hpp"

#include "engine/check.hpp"

#include <bit>

namespace troupe {

block_index::block_index(std::int64_t capacity)
  : slots_(std::bit_ceil(static_cast<std::size_t>(2 * std::max<std::int64_t>(capacity, 4)))),
    mask_(slots_.size() - 1) {}

void block_index::insert(std::uint64_t hash, block_id b) {
  TROUPE_CHECK(b >= 0 && 2 * (size_ + 1) <= static_cast<std::int64_t>(slots_.size()), "block index over capacity");
  // Probes end at empty slots only: too many tombstones make every miss long.
  if (4 * (size_ + tombstones_ + 1) > 3 * static_cast<std::int64_t>(slots_.size())) rebuild();
  for (std::size_t i = slot_of(hash);; i = (i + 1) & mask_) {
    auto& s = slots_[i];
    if (s.block < 0) {
      if (s.block == tombstone) --tombstones_;
      s = {hash, b};
      ++size_;
      return;
    }
  }
}

void block_index::erase(std::uint64_t hash, block_id b) {
  for (std::size_t i = slot_of(hash);; i = (i + 1) & mask_) {
    auto& s = slots_[i];
    TROUPE_CHECK(s.block != empty, "erasing a block the index does not hold");
    if (s.block == b && s.hash == hash) {
      s.block = tombstone;
      --size_;
      ++tombstones_;
      return;
    }
  }
}

void block_index::rebuild() {
  std::vector<slot> old(slots_.size());
  old.swap(slots_);
  size_ = 0;
  tombstones_ = 0;
  for (const auto& s : old)
    if (s.block >= 0) {
      std::size_t i = slot_of(s.hash);
      while (slots_[i].block != empty) i = (i + 1) & mask_;
      slots_[i] = s;
      ++size_;
    }
}

} // namespace troupe
