#pragma once
// The prefix cache's evictable blocks, smallest (eviction key, slot) first.
// Keys that arrive in order, as LRU's ticks do, are appended to a sorted
// FIFO in O(1) (removed lazily); the rest go to a binary heap. One array
// gives each slot's place, heap index or FIFO index, so an operation reads
// one small word per slot. The smallest entry is the lesser of the two
// fronts. (A std::set allocated a node per entry, and a heap alone cost a
// cache miss per level on every eviction: a fifth of a simulated request.)

#include "base/check.hpp"
#include "policies/api/eviction.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

class evictable_set {
public:
  /// Slots are [0, num_slots).
  explicit evictable_set(std::size_t num_slots) : pos_(num_slots, absent) {}

  auto size() const -> std::size_t { return heap_.size() + fifo_live_; }
  auto empty() const -> bool { return size() == 0; }
  auto contains(std::size_t slot) const -> bool { return pos_[slot] != absent; }
  /// Entries held, live, stale or consumed: stays within a constant of size().
  auto footprint() const -> std::size_t { return heap_.size() + fifo_.size(); }

  void insert(std::size_t slot, policy::eviction_key key);
  void erase(std::size_t slot);
  /// The slot to evict first; the set must not be empty.
  auto min() -> std::size_t;
  static constexpr std::size_t none = SIZE_MAX;
  /// A hint for prefetching: the slot k places down the in-order FIFO
  /// (possibly stale, possibly not next after heap entries), or none.
  auto upcoming(std::size_t k) const -> std::size_t {
    return head_ + k < fifo_.size() ? fifo_[head_ + k].slot : none;
  }

  /// f(slot, key) for every entry; for invariant checks.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& e : heap_) f(e.slot, e.key);
    for (std::size_t i = head_; i < fifo_.size(); ++i)
      if (live(i)) f(fifo_[i].slot, fifo_[i].key);
  }
  /// Aborts unless the heap is ordered, the FIFO sorted, and positions agree.
  void check_invariants() const;

private:
  // pos_[slot]: its heap index (>= 0), absent, or FIFO index i as -2 - i.
  static constexpr std::int32_t absent = -1;
  static auto fifo_pos(std::size_t i) -> std::int32_t { return -2 - static_cast<std::int32_t>(i); }
  struct entry {
    policy::eviction_key key;
    std::uint32_t slot = 0;
    auto operator<(const entry& o) const -> bool { return key != o.key ? key < o.key : slot < o.slot; }
  };
  /// FIFO entry i is live while its slot still points at it (an erased or
  /// re-inserted slot leaves a stale entry behind).
  auto live(std::size_t i) const -> bool { return pos_[fifo_[i].slot] == fifo_pos(i); }
  void place(std::size_t i, const entry& e) {
    heap_[i] = e;
    pos_[e.slot] = static_cast<std::int32_t>(i);
  }
  void up(std::size_t i);
  void down(std::size_t i);
  void drop_stale_front();
  void compact();

  std::vector<entry> heap_;
  std::vector<entry> fifo_; ///< sorted; [head_, end) not yet consumed
  std::size_t head_ = 0;
  std::size_t fifo_live_ = 0;
  std::vector<std::int32_t> pos_; ///< by slot: see fifo_pos
};

inline void evictable_set::up(std::size_t i) {
  const entry e = heap_[i];
  while (i > 0 && e < heap_[(i - 1) / 2]) {
    place(i, heap_[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  place(i, e);
}

inline void evictable_set::down(std::size_t i) {
  const entry e = heap_[i];
  for (;;) {
    std::size_t c = 2 * i + 1;
    if (c >= heap_.size()) break;
    if (c + 1 < heap_.size() && heap_[c + 1] < heap_[c]) ++c;
    if (!(heap_[c] < e)) break;
    place(i, heap_[c]);
    i = c;
  }
  place(i, e);
}

inline void evictable_set::insert(std::size_t slot, policy::eviction_key key) {
  TROUPE_CHECK(pos_[slot] == absent, "a block made evictable twice");
  const entry e{key, static_cast<std::uint32_t>(slot)};
  if (fifo_live_ == 0) { // start the run afresh
    fifo_.clear();
    head_ = 0;
  }
  if (fifo_.size() == head_ || !(e < fifo_.back())) {
    // Evictions consume the FIFO from its head: the consumed part goes once
    // it is half of it (else the FIFO grew by an entry per block ever freed).
    if (head_ > 1024 && 2 * head_ > fifo_.size()) compact();
    TROUPE_CHECK(fifo_.size() < (std::size_t{1} << 30), "eviction FIFO too long");
    pos_[slot] = fifo_pos(fifo_.size());
    fifo_.push_back(e);
    ++fifo_live_;
    return;
  }
  heap_.push_back(e);
  up(heap_.size() - 1);
}

inline void evictable_set::erase(std::size_t slot) {
  const std::int32_t p = pos_[slot];
  TROUPE_CHECK(p != absent, "erasing a block that is not evictable");
  pos_[slot] = absent;
  if (p < absent) {
    --fifo_live_;
    // Mostly stale: keep the live entries only, so it cannot grow without bound.
    if (fifo_.size() - head_ > 2 * fifo_live_ + 64) compact();
    return;
  }
  const auto i = static_cast<std::size_t>(p);
  const entry last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  place(i, last);
  up(i);
  down(static_cast<std::size_t>(pos_[last.slot]));
}

// The live FIFO entries moved to its front, in order, renumbered.
inline void evictable_set::compact() {
  std::size_t keep = 0;
  for (std::size_t i = head_; i < fifo_.size(); ++i)
    if (live(i)) {
      pos_[fifo_[i].slot] = fifo_pos(keep);
      fifo_[keep++] = fifo_[i];
    }
  fifo_.resize(keep);
  head_ = 0;
}

inline void evictable_set::drop_stale_front() {
  while (head_ < fifo_.size() && !live(head_)) ++head_;
}

inline auto evictable_set::min() -> std::size_t {
  TROUPE_CHECK(!empty(), "no evictable block");
  drop_stale_front();
  if (head_ < fifo_.size() && (heap_.empty() || fifo_[head_] < heap_.front())) return fifo_[head_].slot;
  return heap_.front().slot;
}

inline void evictable_set::check_invariants() const {
  for (std::size_t i = 0; i < heap_.size(); ++i) {
    TROUPE_CHECK(pos_[heap_[i].slot] == static_cast<std::int32_t>(i), "a heap entry's position is stale");
    TROUPE_CHECK(i == 0 || !(heap_[i] < heap_[(i - 1) / 2]), "the eviction heap is out of order");
  }
  std::size_t live_count = 0;
  const entry* prev = nullptr;
  for (std::size_t i = head_; i < fifo_.size(); ++i) {
    TROUPE_CHECK(prev == nullptr || !(fifo_[i] < *prev), "the eviction FIFO is out of order");
    prev = &fifo_[i];
    live_count += live(i);
  }
  TROUPE_CHECK(live_count == fifo_live_, "the eviction FIFO's live count drifted");
  std::size_t members = 0;
  for (std::size_t s = 0; s < pos_.size(); ++s) {
    const auto p = pos_[s];
    members += p != absent;
    if (p >= absent) continue;
    const auto i = static_cast<std::size_t>(-2 - p);
    TROUPE_CHECK(i >= head_ && i < fifo_.size() && fifo_[i].slot == s, "a slot's FIFO position is stale");
  }
  TROUPE_CHECK(members == size(), "positions and entries disagree");
}

} // namespace troupe
