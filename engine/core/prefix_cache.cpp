#include "engine/core/prefix_cache.hpp"

#include "engine/check.hpp"

#include <algorithm>

namespace troupe {

auto hash_block(const block_key& k) -> block_hash {
  // FNV-1a over the tenant, the parent hash and the token ids, then a
  // splitmix finaliser so that nearby keys spread over the table.
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  mix(k.tenant);
  mix(k.parent);
  for (const token_id t : k.tokens) mix(static_cast<std::uint32_t>(t));
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
    index_(std::max(num_blocks, 0)) {
  free_.reserve(blocks_.size());
  for (std::int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(first_id + b);
}

void prefix_cache::touch(block& blk, std::int32_t priority) {
  blk.last_used = ++tick_;
  blk.priority = std::max(blk.priority, priority);
}

void prefix_cache::unpublish(block_id b) {
  auto& blk = at(b);
  if (!blk.published) return;
  index_.erase(blk.hash, b);
  blk = block{};
}

auto prefix_cache::allocate(std::int32_t priority) -> std::optional<block_id> {
  block_id b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    b = evictable_.begin()->second;
    evictable_.erase(evictable_.begin());
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

auto prefix_cache::acquire_cached(const block_key& k, block_hash h, std::int32_t priority)
    -> std::optional<block_id> {
  ++num_queries_;
  // Equal hashes with another key are collisions: keep looking.
  const block_id b = index_.find(h, [&](block_id c) { return at(c).key == k; });
  if (b >= 0) {
    auto& blk = at(b);
    if (blk.refs == 0) evictable_.erase({blk.evict_key, b});
    ++blk.refs;
    ++blk.hits;
    ++num_hits_;
    touch(blk, priority);
    return b;
  }
  return std::nullopt;
}

auto prefix_cache::publish(block_id b, block_key k, block_hash h, std::int32_t depth) -> bool {
  auto& blk = at(b);
  TROUPE_CHECK(blk.refs > 0, "publishing a block nobody holds");
  if (blk.published) return blk.key == k;
  if (index_.find(h, [&](block_id c) { return at(c).key == k; }) >= 0) return false;
  blk.published = true;
  blk.key = std::move(k);
  blk.hash = h;
  blk.depth = depth;
  index_.insert(h, b);
  return true;
}

void prefix_cache::release(block_id b) {
  auto& blk = at(b);
  TROUPE_CHECK(blk.refs > 0, "releasing a block nobody holds");
  if (--blk.refs > 0) return;
  blk.last_used = ++tick_;
  if (!blk.published) {
    blk = block{};
    free_.push_back(b);
    return;
  }
  policy::block_view v;
  v.id = b;
  v.last_used_tick = blk.last_used;
  v.num_hits = blk.hits;
  v.priority = blk.priority;
  v.depth = blk.depth;
  blk.evict_key = eviction_.key(v);
  evictable_.emplace(blk.evict_key, b);
}

void prefix_cache::check_invariants() const {
  std::vector<int> where(blocks_.size(), 0); // 1 free, 2 evictable
  const auto slot = [this](block_id b) { return static_cast<std::size_t>(b - first_id_); };
  for (const block_id b : free_) {
    TROUPE_CHECK(where[slot(b)] == 0, "block twice in the free list");
    where[slot(b)] = 1;
    const auto& blk = at(b);
    TROUPE_CHECK(blk.refs == 0 && !blk.published, "a free block is referenced or published");
  }
  for (const auto& [key, b] : evictable_) {
    TROUPE_CHECK(where[slot(b)] == 0, "an evictable block is also free");
    where[slot(b)] = 2;
    const auto& blk = at(b);
    TROUPE_CHECK(blk.refs == 0 && blk.published && blk.evict_key == key, "evictable block in a wrong state");
  }
  std::size_t published = 0;
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const auto& blk = blocks_[b];
    TROUPE_CHECK(blk.refs >= 0, "negative reference count");
    if (where[b] == 0) TROUPE_CHECK(blk.refs > 0, "a block is neither free, evictable nor referenced");
    if (blk.published) {
      ++published;
      TROUPE_CHECK(blk.hash == hash_block(blk.key), "a published block's hash is stale");
    }
  }
  TROUPE_CHECK(static_cast<std::int64_t>(published) == index_.size(), "the index and the published blocks disagree");
  index_.for_each([this](block_hash h, block_id b) {
    TROUPE_CHECK(at(b).published && at(b).hash == h, "the index names an unpublished block");
  });
}

} // namespace troupe
