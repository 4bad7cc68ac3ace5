#pragma once
// A device's KV blocks with reference counts and a prefix cache (vLLM's
// automatic prefix caching, SGLang's RadixAttention): a full block is found
// by the chained hash of (tenant namespace, its parent block's hash, its
// tokens), so requests of one tenant with an equal prefix share its blocks,
// and two tenants never do. A block nobody references stays cached
// (evictable) until a new block is needed and the eviction policy picks it.
// Deterministic: time is a logical tick, one per operation.

#include "engine/core/block_index.hpp"
#include "engine/core/block_source.hpp"
#include "engine/core/evictable_set.hpp"
#include "base/types.hpp"
#include "policies/api/eviction.hpp"

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace troupe {

/// The chained hash of a block's key (64-bit; lookups compare whole keys, so
/// a collision costs a cache miss, never wrong KV).
auto hash_block(block_key_view k) -> block_hash;

class prefix_cache final : public block_source {
public:
  /// Blocks [first_id, first_id + num_blocks) (a device's pool, or one
  /// replica's lease of it), all free. `eviction` must outlive the cache.
  prefix_cache(std::int32_t num_blocks, const policy::eviction_policy& eviction, block_id first_id = 0);

  /// A block for new KV, referenced once: a free block if any, else the
  /// evictable block with the smallest eviction key (dropped from the
  /// cache). nullopt when every block is referenced. O(log n).
  [[nodiscard]] auto allocate(std::int32_t priority) -> std::optional<block_id> override;
  /// The cached block whose key is `k`, with one more reference (a hit), or
  /// nullopt (a miss). O(log n + block size).
  [[nodiscard]] auto acquire_cached(block_key_view k, block_hash h, std::int32_t priority)
      -> std::optional<block_id> override;
  [[nodiscard]] auto acquire_cached(block_key_view k, std::int32_t priority) -> std::optional<block_id> {
    return acquire_cached(k, hash_block(k), priority);
  }
  /// Makes a referenced, fully computed block findable by `k`, whose hash
  /// the caller computed (hash_block(k): it chains the next block's key).
  /// False (and nothing changes) when the cache already holds that key in
  /// another block: the caller keeps its private copy.
  auto publish(block_id b, block_key_view k, block_hash h, std::int32_t depth) -> bool override;
  auto publish(block_id b, block_key_view k, std::int32_t depth) -> bool { return publish(b, k, hash_block(k), depth); }
  /// Drops one reference; at zero a published block becomes evictable, an
  /// unpublished one free. O(log n).
  void release(block_id b) override;
  void share(block_id b) override;
  auto references(block_id b) const -> std::int32_t override { return at(b).refs; }
  void prefetch_publish(block_id b, block_hash h) const override {
    index_.prefetch(h);
    if (key_size_ == 0) return;
    __builtin_prefetch(key_record(b), 1);
    __builtin_prefetch(key_record(b) + key_head + key_size_ - 1, 1); // a record may span two lines
  }
  /// The same for each, the last first, fetching blocks ahead from memory.
  void release_all(std::span<const block_id> blocks) override;

  auto num_blocks() const -> std::int32_t { return static_cast<std::int32_t>(blocks_.size()); }
  auto num_free() const -> std::int64_t { return static_cast<std::int64_t>(free_.size()); }
  auto num_evictable() const -> std::int64_t { return static_cast<std::int64_t>(evictable_.size()); }
  /// Blocks a new allocation can get: free + evictable.
  auto num_available() const -> std::int64_t override { return num_free() + num_evictable(); }
  auto capacity() const -> std::int64_t override { return num_blocks(); }
  auto num_referenced() const -> std::int64_t { return num_blocks() - num_available(); }
  /// Whether a block with key k (hash h) is cached; takes nothing, counts
  /// no query (what a router asks of a replica's cache).
  auto holds_key(block_key_view k, block_hash h) const -> bool {
    return index_.find(h, [&](block_id c) { return holds(c, k); }) >= 0;
  }
  auto ref_count(block_id b) const -> std::int32_t { return at(b).refs; }
  auto is_published(block_id b) const -> bool { return at(b).hash != 0; }
  auto tenant_of(block_id b) const -> std::uint64_t { return is_published(b) ? key_word(b, 0) : 0; }
  void count_unlooked(std::uint64_t n) override { num_queries_ += n; }
  /// Forgets every cached block nobody references (a device that was shut
  /// down and starts cold): they become free, found by no key.
  void drop_cached();
  /// Full prompt blocks matched against the cache (each a query, looked up
  /// or past the first miss), and of those, found.
  auto num_queries() const -> std::uint64_t { return num_queries_; }
  auto num_hits() const -> std::uint64_t { return num_hits_; }
  auto num_evictions() const -> std::uint64_t { return num_evictions_; }

  /// Aborts (TROUPE_CHECK) if any internal invariant is broken: every block
  /// in exactly one of free / evictable / referenced, counts consistent, the
  /// index pointing at published blocks only. O(n); for tests.
  void check_invariants() const override;

private:
  // What every operation touches, two blocks to a cache line; a published
  // block's key lives apart (keys_), read by lookups and written once.
  struct alignas(32) block {
    std::int32_t refs = 0;
    std::int32_t depth = 0;
    std::int32_t priority = 0;
    std::uint32_t hits = 0;       ///< saturates
    std::uint64_t last_used = 0;
    block_hash hash = 0;          ///< 0: not published (hash_block never gives 0)
  };
  static_assert(sizeof(block) == 32);

  void unpublish(block_id b);
  void prefetch_victims() const;
  auto view_of(block_id b) const -> policy::block_view; ///< what the eviction policy sees
  // A published block's key, one record per block (no allocation when
  // publishing or evicting): tenant and parent hash as two token-sized
  // halves each, then the tokens.
  static constexpr std::size_t key_head = 4;
  auto key_record(block_id b) const -> const token_id* {
    return key_words_.data() + static_cast<std::size_t>(b - first_id_) * (key_head + key_size_);
  }
  auto key_word(block_id b, std::size_t i) const -> std::uint64_t {
    if (key_size_ == 0) return 0;
    std::uint64_t w;
    std::memcpy(&w, key_record(b) + 2 * i, sizeof w);
    return w;
  }
  auto tokens_of(block_id b) const -> std::span<const token_id> { return {key_record(b) + key_head, key_size_}; }
  auto holds(block_id b, block_key_view k) const -> bool {
    return k.tokens.size() == key_size_ && key_word(b, 0) == k.tenant && key_word(b, 1) == k.parent &&
           std::equal(k.tokens.begin(), k.tokens.end(), tokens_of(b).begin());
  }
  void touch(block& blk, std::int32_t priority);
  auto at(block_id b) -> block& { return blocks_[static_cast<std::size_t>(b - first_id_)]; }
  auto at(block_id b) const -> const block& { return blocks_[static_cast<std::size_t>(b - first_id_)]; }

  const policy::eviction_policy& eviction_;
  block_id first_id_;
  std::vector<block> blocks_; ///< block b at b - first_id_
  std::size_t key_size_ = 0;  ///< tokens per key, set by the first publish
  std::vector<token_id> key_words_; ///< block b's key record at (b - first_id_) * (key_head + key_size_)
  std::vector<block_id> free_; ///< a stack
  evictable_set evictable_; ///< by slot (b - first_id_)
  block_index index_; ///< published blocks by hash
  std::uint64_t tick_ = 0;
  std::uint64_t num_queries_ = 0;
  std::uint64_t num_hits_ = 0;
  std::uint64_t num_evictions_ = 0;
};

} // namespace troupe
