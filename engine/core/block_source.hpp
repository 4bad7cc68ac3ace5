#pragma once
// Where a replica's KV blocks come from, as its kv_cache_manager sees it:
// the device's prefix cache itself (one process, the simulator, the tests),
// or a lease of it held by a scheduler whose cache lives in the memory
// manager actor (engine/core/leased_blocks.hpp).

#include "base/types.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace troupe {

using block_hash = std::uint64_t;

/// Blocks that hold `num_tokens` tokens at `block_size` tokens per block.
constexpr auto blocks_for(std::int64_t num_tokens, std::int64_t block_size) -> std::int64_t {
  return (num_tokens + block_size - 1) / block_size;
}

/// What names a full block's content: its tenant, its parent's hash (0 for a
/// prompt's first block) and its tokens. Equal keys mean equal KV. A view
/// of tokens held elsewhere (a request's prompt or output), so that looking
/// up or publishing a block copies nothing.
struct block_key_view {
  std::uint64_t tenant = 0;
  block_hash parent = 0;
  std::span<const token_id> tokens;
};

/// The same, owning its tokens (queued for the memory manager).
struct block_key {
  std::uint64_t tenant = 0;
  block_hash parent = 0;
  std::vector<token_id> tokens;
  friend auto operator==(const block_key&, const block_key&) -> bool = default;
  operator block_key_view() const { return {tenant, parent, tokens}; } // NOLINT: a view of it
};

/// The key of block i of a contiguous token run, `block_size` tokens per block.
inline auto key_of(std::uint64_t tenant, block_hash parent, std::span<const token_id> tokens, std::size_t i,
                   std::size_t block_size) -> block_key_view {
  return {tenant, parent, tokens.subspan(i * block_size, block_size)};
}

class block_source {
public:
  virtual ~block_source() = default;
  /// The most blocks one request could ever be given (what check() compares against).
  virtual auto capacity() const -> std::int64_t = 0;
  /// Blocks allocate() can hand out now, without waiting.
  virtual auto num_available() const -> std::int64_t = 0;
  /// A block for new KV, referenced once; nullopt when none is available now.
  [[nodiscard]] virtual auto allocate(std::int32_t priority) -> std::optional<block_id> = 0;
  /// The cached block holding `k` (whose hash_block() the caller has, as it
  /// chains the next key), referenced once more; nullopt on a miss (always,
  /// where matching happens elsewhere).
  [[nodiscard]] virtual auto acquire_cached(block_key_view k, block_hash h, std::int32_t priority)
      -> std::optional<block_id> = 0;
  /// A match looked up this many blocks no further (past its first miss):
  /// counted as queries, so that hits over queries is the share of prompt
  /// blocks found cached. Default: nothing.
  virtual void count_unlooked(std::uint64_t n) { (void)n; }
  /// Makes a referenced, fully computed block findable by `k` (hash h).
  virtual auto publish(block_id b, block_key_view k, block_hash h, std::int32_t depth) -> bool = 0;
  /// Drops one reference.
  virtual void release(block_id b) = 0;
  /// One more reference on a block a request holds, for another request
  /// whose table lists it too (n choices of one prompt share its KV).
  virtual void share(block_id b) = 0;
  /// The references requests hold on b (the tables that list it); for the
  /// scheduler's invariant checks.
  virtual auto references(block_id b) const -> std::int32_t = 0;
  /// A hint that b will soon be published with hash h: fetch what that
  /// touches. Default: nothing.
  virtual void prefetch_publish(block_id b, block_hash h) const { (void)b, (void)h; }
  /// Drops one reference on each, the last first (a chain's tail goes
  /// before its head at equal recency).
  virtual void release_all(std::span<const block_id> blocks) {
    for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) release(*b);
  }
  /// Takes charge of a reference made elsewhere for one of this source's
  /// requests (a prefix match at the memory manager). Default: nothing, for
  /// sources that made it themselves.
  virtual void adopt(block_id b) { (void)b; }
  /// Whether a released block can be allocated again from this source (a
  /// cache: yes; a lease: no, its released matches go back to the manager).
  virtual auto releases_locally() const -> bool { return true; }
  /// Aborts if an internal invariant is broken; for tests.
  virtual void check_invariants() const = 0;
};

} // namespace troupe
