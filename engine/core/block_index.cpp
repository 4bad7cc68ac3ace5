#include "engine/core/block_index.hpp"

#include <bit>

namespace troupe {

block_index::block_index(std::int64_t capacity)
  : slots_(std::bit_ceil(static_cast<std::size_t>(2 * std::max<std::int64_t>(capacity, 4)))),
    mask_(slots_.size() - 1) {}

void block_index::insert(std::uint64_t hash, block_id b) {
  (void)insert_unless(hash, b, [](block_id) { return false; });
}

void block_index::erase(std::uint64_t hash, block_id b) {
  std::size_t i = slot_of(hash);
  for (;; i = (i + 1) & mask_) {
    TROUPE_CHECK(slots_[i].block != empty, "erasing a block the index does not hold");
    if (slots_[i].block == b && slots_[i].hash == hash) break;
  }
  // Backward shift: an entry further along the chain moves into the hole
  // unless its home slot lies after the hole (it would become unreachable).
  for (std::size_t j = i;;) {
    j = (j + 1) & mask_;
    if (slots_[j].block == empty) break;
    const std::size_t home = slot_of(slots_[j].hash);
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = {0, empty};
  --size_;
}

} // namespace troupe
