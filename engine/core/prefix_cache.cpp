#include "engine/core/prefix_cache.hpp"

#include "base/check.hpp"

#include <algorithm>

namespace troupe {

auto hash_block(block_key_view k) -> block_hash {
  // A word at a time (two token ids per word) into two independent lanes
  // (half the multiply chain's latency): multiply, rotate; then the lanes
  // combined and a splitmix finaliser so that nearby keys spread over the
  // table. (Byte-wise FNV-1a cost a sixth of a simulated request.)
  std::uint64_t a = 0x9e3779b97f4a7c15ull ^ k.tenant, b = 0xc2b2ae3d27d4eb4full ^ k.parent;
  const auto mix = [](std::uint64_t& h, std::uint64_t v) {
    h = (h ^ v) * 0xff51afd7ed558ccdull;
    h = (h << 31) | (h >> 33);
  };
  const auto word = [&k](std::size_t i) {
    return static_cast<std::uint32_t>(k.tokens[i]) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.tokens[i + 1])) << 32);
  };
  std::size_t i = 0;
  for (; i + 3 < k.tokens.size(); i += 4) {
    mix(a, word(i));
    mix(b, word(i + 2));
  }
  for (; i + 1 < k.tokens.size(); i += 2) mix(a, word(i));
  if (i < k.tokens.size()) mix(b, static_cast<std::uint32_t>(k.tokens[i]));
  mix(a, k.tokens.size());
  std::uint64_t h = a ^ ((b << 17) | (b >> 47)) ^ (b * 0x94d049bb133111ebull);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h; // 0 is "no parent"
}

prefix_cache::prefix_cache(std::int32_t num_blocks, const policy::eviction_policy& eviction, block_id first_id)
  : eviction_(eviction),
    first_id_(first_id),
    blocks_(static_cast<std::size_t>(std::max(num_blocks, 0))),
    evictable_(blocks_.size()),
    index_(std::max(num_blocks, 0)) {
  free_.reserve(blocks_.size());
  for (std::int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(first_id + b);
}

void prefix_cache::touch(block& blk, std::int32_t priority) {
  blk.last_used = ++tick_;
  blk.priority = std::max(blk.priority, priority);
}

void prefix_cache::unpublish(block_id b) {
  const auto& blk = at(b);
  if (blk.hash != 0) index_.erase(blk.hash, b); // allocate() clears the rest
}

// Eviction order is known ahead (LRU's FIFO): the blocks a few evictions
// on are fetched now, and the index slots of the nearer ones (their hash
// fetched earlier), so an eviction rarely waits for memory. Each block is
// otherwise a cache miss, and two for its index entry: half a simulated
// request's time.
void prefix_cache::prefetch_victims() const {
  constexpr std::size_t block_ahead = 32, slot_ahead = 16;
  if (const auto s = evictable_.upcoming(block_ahead); s != evictable_set::none) __builtin_prefetch(&blocks_[s]);
  if (const auto s = evictable_.upcoming(slot_ahead); s != evictable_set::none && blocks_[s].hash != 0)
    index_.prefetch(blocks_[s].hash);
}

void prefix_cache::drop_cached() {
  while (!evictable_.empty()) {
    const block_id b = first_id_ + static_cast<block_id>(evictable_.min());
    evictable_.erase(static_cast<std::size_t>(b - first_id_));
    unpublish(b);
    at(b) = block{};
    free_.push_back(b);
  }
}

auto prefix_cache::allocate(std::int32_t priority) -> std::optional<block_id> {
  block_id b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    prefetch_victims();
    b = first_id_ + static_cast<block_id>(evictable_.min());
    evictable_.erase(static_cast<std::size_t>(b - first_id_));
    unpublish(b);
    ++num_evictions_;
  } else {
    return std::nullopt;
  }
  auto& blk = at(b);
  blk = block{};
  blk.refs = 1;
  touch(blk, priority);
  return b;
}

auto prefix_cache::acquire_cached(block_key_view k, block_hash h, std::int32_t priority)
    -> std::optional<block_id> {
  ++num_queries_;
  // Equal hashes with another key are collisions: keep looking.
  const block_id b = index_.find(h, [&](block_id c) { return holds(c, k); });
  if (b >= 0) {
    auto& blk = at(b);
    if (blk.refs == 0) evictable_.erase(static_cast<std::size_t>(b - first_id_));
    ++blk.refs;
    if (blk.hits != UINT32_MAX) ++blk.hits;
    ++num_hits_;
    touch(blk, priority);
    return b;
  }
  return std::nullopt;
}

auto prefix_cache::publish(block_id b, block_key_view k, block_hash h, std::int32_t depth) -> bool {
  auto& blk = at(b);
  TROUPE_CHECK(blk.refs > 0, "publishing a block nobody holds");
  if (key_size_ == 0) {
    TROUPE_CHECK(!k.tokens.empty(), "a block key without tokens");
    key_size_ = k.tokens.size();
    key_words_.resize(blocks_.size() * (key_head + key_size_));
  }
  TROUPE_CHECK(k.tokens.size() == key_size_, "block keys of different sizes");
  if (blk.hash != 0) return holds(b, k);
  if (!index_.insert_unless(h, b, [&](block_id c) { return holds(c, k); })) return false;
  token_id* rec = key_words_.data() + static_cast<std::size_t>(b - first_id_) * (key_head + key_size_);
  std::memcpy(rec, &k.tenant, sizeof k.tenant);
  std::memcpy(rec + 2, &k.parent, sizeof k.parent);
  std::copy(k.tokens.begin(), k.tokens.end(), rec + key_head);
  blk.hash = h;
  blk.depth = depth;
  return true;
}

void prefix_cache::release(block_id b) {
  auto& blk = at(b);
  TROUPE_CHECK(blk.refs > 0, "releasing a block nobody holds");
  if (--blk.refs > 0) return;
  blk.last_used = ++tick_;
  if (blk.hash == 0) { // allocate() resets it
    free_.push_back(b);
    return;
  }
  evictable_.insert(static_cast<std::size_t>(b - first_id_), eviction_.key(view_of(b)));
}

void prefix_cache::share(block_id b) {
  auto& blk = at(b);
  TROUPE_CHECK(blk.refs > 0, "sharing a block nobody holds");
  ++blk.refs;
}

void prefix_cache::release_all(std::span<const block_id> blocks) {
  constexpr std::size_t ahead = 16;
  for (std::size_t i = blocks.size(); i-- > 0;) {
    if (i >= ahead) __builtin_prefetch(&at(blocks[i - ahead]));
    release(blocks[i]);
  }
}

auto prefix_cache::view_of(block_id b) const -> policy::block_view {
  const auto& blk = at(b);
  policy::block_view v;
  v.id = b;
  v.last_used_tick = blk.last_used;
  v.num_hits = blk.hits;
  v.priority = blk.priority;
  v.depth = blk.depth;
  return v;
}

void prefix_cache::check_invariants() const {
  std::vector<int> where(blocks_.size(), 0); // 1 free, 2 evictable
  const auto slot = [this](block_id b) { return static_cast<std::size_t>(b - first_id_); };
  for (const block_id b : free_) {
    TROUPE_CHECK(where[slot(b)] == 0, "block twice in the free list");
    where[slot(b)] = 1;
    const auto& blk = at(b);
    TROUPE_CHECK(blk.refs == 0 && blk.hash == 0, "a free block is referenced or published");
  }
  evictable_.check_invariants();
  evictable_.for_each([&](std::size_t s, const policy::eviction_key& key) {
    TROUPE_CHECK(where[s] == 0, "an evictable block is also free");
    where[s] = 2;
    const auto& blk = blocks_[s];
    // (An evictable block's recency, hits and priority do not change: its key is the one it was given.)
    TROUPE_CHECK(blk.refs == 0 && blk.hash != 0 && eviction_.key(view_of(first_id_ + static_cast<block_id>(s))) == key,
                 "evictable block in a wrong state");
  });
  for (std::size_t s = 0; s < blocks_.size(); ++s)
    TROUPE_CHECK(evictable_.contains(s) == (where[s] == 2), "a block is evictable in one place only");
  std::size_t published = 0;
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const auto& blk = blocks_[b];
    TROUPE_CHECK(blk.refs >= 0, "negative reference count");
    if (where[b] == 0) TROUPE_CHECK(blk.refs > 0, "a block is neither free, evictable nor referenced");
    if (blk.hash != 0) {
      ++published;
      const auto id = static_cast<block_id>(b) + first_id_;
      const auto t = tokens_of(id);
      TROUPE_CHECK(blk.hash == hash_block({key_word(id, 0), key_word(id, 1), t}),
                   "a published block's hash is stale");
    }
  }
  TROUPE_CHECK(static_cast<std::int64_t>(published) == index_.size(), "the index and the published blocks disagree");
  index_.for_each([this](block_hash h, block_id b) {
    TROUPE_CHECK(at(b).hash == h, "the index names an unpublished block");
  });
}

} // namespace troupe
