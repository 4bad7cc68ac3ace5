#pragma once
// The prefix cache's map from content hash to block: open addressing with
// linear probing in one flat array, sized for every block of the pool, so a
// lookup costs about one cache miss (a node-based multimap cost three, and
// was the scheduler step's largest item). Equal hashes may repeat (distinct
// keys colliding): find() visits each candidate. Erasing shifts the probe
// chain back (no tombstones), so a probe always ends at its first empty slot
// and the table never needs rebuilding.

#include "base/check.hpp"
#include "base/types.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

class block_index {
public:
  /// Room for `capacity` entries at most.
  explicit block_index(std::int64_t capacity);

  void insert(std::uint64_t hash, block_id b);
  /// Inserts (hash, b) unless an entry with this hash satisfies same(block);
  /// returns whether it inserted. One probe for a lookup and an insert.
  template <class F>
  auto insert_unless(std::uint64_t hash, block_id b, F&& same) -> bool {
    for (std::size_t i = slot_of(hash);; i = (i + 1) & mask_) {
      auto& s = slots_[i];
      if (s.block == empty) {
        TROUPE_CHECK(b >= 0 && 2 * (size_ + 1) <= static_cast<std::int64_t>(slots_.size()), "block index over capacity");
        s = {hash, b};
        ++size_;
        return true;
      }
      if (s.hash == hash && same(s.block)) return false;
    }
  }
  /// Removes the entry (hash, b); it must be present.
  void erase(std::uint64_t hash, block_id b);
  /// Calls f(block) for every entry with this hash until f returns true;
  /// returns that block, or -1.
  template <class F>
  auto find(std::uint64_t hash, F&& f) const -> block_id {
    for (std::size_t i = slot_of(hash);; i = (i + 1) & mask_) {
      const auto& s = slots_[i];
      if (s.block == empty) return -1;
      if (s.hash == hash && f(s.block)) return s.block;
    }
  }
  auto size() const -> std::int64_t { return size_; }
  /// A hint: fetch the slot where a probe for `hash` starts.
  void prefetch(std::uint64_t hash) const { __builtin_prefetch(&slots_[slot_of(hash)]); }
  /// Every live (hash, block), for invariant checks.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& s : slots_)
      if (s.block >= 0) f(s.hash, s.block);
  }

private:
  static constexpr block_id empty = -1;
  struct slot {
    std::uint64_t hash = 0;
    block_id block = empty;
  };
  auto slot_of(std::uint64_t hash) const -> std::size_t { return static_cast<std::size_t>(hash) & mask_; }

  std::vector<slot> slots_; ///< a power of two, at least twice the capacity
  std::size_t mask_;
  std::int64_t size_ = 0;
};

} // namespace troupe
