#pragma once
// Per-request KV blocks over a device's prefix_cache (vLLM v1's
// KVCacheManager): the longest cached prefix at admission, blocks appended
// as a request grows, full blocks published to the cache once computed, all
// references dropped when it ends. Deterministic, single-threaded.

#include "engine/core/block_source.hpp"
#include "engine/core/prefix_cache.hpp"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace troupe {

struct kv_cache_options {
  std::int32_t block_size = 16;
  /// Admissions leave at least this many blocks available, so that running
  /// requests can grow without preempting at once (vLLM's watermark).
  std::int32_t watermark_blocks = 0;
  bool enable_prefix_caching = true;
  /// > 0: every layer of the model attends to its last this many positions
  /// only (Mistral's sliding window), so a block wholly before the window of
  /// a request's next token is released (slide()). 0: keep every block.
  std::int32_t sliding_window_tokens = 0;
};

/// One request's blocks; its address is stable while it is tracked, so a
/// scheduler keeps it with the request instead of looking it up each step.
struct kv_entry {
  // What every step reads first (grow, has_commit, prepare_commit): with
  // the map node's header, one cache line.
  std::vector<block_id> blocks;
  std::int32_t num_published = 0; ///< leading full blocks already in the cache
  /// The chain hash of block num_published, computed ahead (prepare_commit);
  /// valid while next_index == num_published (a block's hash is a function
  /// of the request's tokens, which never change).
  std::int32_t next_index = -1;
  block_hash next_hash = 0;
  block_hash last_hash = 0;       ///< chain hash of block num_published - 1
  std::uint64_t tenant = 0;
  std::int32_t priority = 0;
  /// Leading blocks released because they fell out of the sliding window:
  /// blocks[0, num_dropped) hold no_block, so a block's index stays its
  /// position / block_size.
  std::int32_t num_dropped = 0;

  static constexpr block_id no_block = -1;
  /// The blocks still held.
  auto live_blocks() const -> std::span<const block_id> {
    return std::span(blocks).subspan(static_cast<std::size_t>(num_dropped));
  }
};

class kv_cache_manager {
public:
  /// `source` (a prefix_cache, or a lease of one) must outlive the manager.
  kv_cache_manager(block_source& source, const kv_cache_options& options);

  /// Starts tracking a request: takes references on the longest run of its
  /// prompt's full blocks already cached for `tenant`, never the whole
  /// prompt (its last token must be computed to sample). Returns how many
  /// prompt tokens those blocks hold (0 with prefix caching off).
  auto begin(request_id id, std::uint64_t tenant, std::int32_t priority, std::span<const token_id> prompt)
      -> std::int32_t;
  /// The same with the match already made (by the memory manager, blocks
  /// referenced for this request): adopts them instead of looking up.
  auto begin_matched(request_id id, std::uint64_t tenant, std::int32_t priority, std::span<const token_id> prompt,
                     std::span<const block_id> matched) -> std::int32_t;
  /// Starts tracking a request whose prompt begins as `from`'s (one of n
  /// choices of the same prompt): its table shares from's first num_blocks
  /// blocks (one more reference each), which hold computed KV of the
  /// prompt; its later blocks are its own. Those shared blocks count as
  /// published (from publishes them, where prefix caching is on). Returns
  /// the tokens they hold. The block where the prompt's last token lies is
  /// never shared: the request computes it into a block of its own (what
  /// copy-on-write would copy, written by the model instead).
  auto fork(const kv_entry& from, request_id id, std::int32_t priority, std::span<const token_id> prompt,
            std::int32_t num_blocks) -> std::int32_t;
  /// Ensures blocks for positions [0, num_tokens). False, with nothing
  /// taken, when the pool cannot supply them (admission: also when it would
  /// dip under the watermark).
  [[nodiscard]] auto grow(request_id id, std::int32_t num_tokens, bool admission) -> bool {
    return grow(requests_.at(id), num_tokens, admission);
  }
  [[nodiscard]] auto grow(kv_entry& e, std::int32_t num_tokens, bool admission) -> bool {
    // Mostly the blocks it has suffice: a multiplication tells (a division
    // per running request per step was a twentieth of a simulated step).
    return num_tokens <= static_cast<std::int64_t>(e.blocks.size()) * options_.block_size ||
           grow_blocks(e, num_tokens, admission);
  }
  /// After a step: the request's tokens are prompt ++ output, of which the
  /// first num_computed have KV. Publishes every newly full block to the cache.
  void commit(request_id id, std::span<const token_id> prompt, std::span<const token_id> output,
              std::int32_t num_computed) {
    commit(requests_.at(id), prompt, output, num_computed);
  }
  void commit(kv_entry& e, std::span<const token_id> prompt, std::span<const token_id> output,
              std::int32_t num_computed);
  /// A hint, when a sampled token fills the request's next block to publish
  /// (its KV comes with the next step): hashes the block now and has the
  /// cache fetch what publishing it will touch, so that commit() does not
  /// wait for memory. Changes nothing that can be observed.
  void prepare_commit(kv_entry& e, std::span<const token_id> prompt, std::span<const token_id> output) {
    // Only the block right after the published ones, once the tokens fill it, and not twice.
    if (options_.enable_prefix_caching && e.next_index != e.num_published &&
        static_cast<std::int64_t>(e.num_published + 1) * options_.block_size <=
            static_cast<std::int64_t>(prompt.size() + output.size()))
      prepare_commit_now(e, prompt, output);
  }
  /// After commit(): with a sliding window, releases the blocks no token from
  /// num_computed on attends to (those wholly before num_computed - window
  /// + 1); they were published first where prefix caching is on. O(1) when
  /// there are none.
  void slide(kv_entry& e, std::int32_t num_computed) {
    if (options_.sliding_window_tokens > 0 &&
        num_computed - options_.sliding_window_tokens + 1 >=
            static_cast<std::int64_t>(e.num_dropped + 1) * options_.block_size)
      slide_now(e, num_computed);
  }
  /// Whether commit() with num_computed tokens has blocks to publish.
  auto has_commit(const kv_entry& e, std::int32_t num_computed) const -> bool {
    return options_.enable_prefix_caching &&
           num_computed >= static_cast<std::int64_t>(e.num_published + 1) * options_.block_size;
  }
  /// Drops every reference the request holds (it ends, or is preempted and
  /// will start again from begin()).
  void end(request_id id);
  /// Drops the request's block references but goes on tracking it (its KV
  /// was swapped out to host memory): a later grow() gives it fresh blocks
  /// for the swapped KV to be copied into, from block num_dropped on (the
  /// dropped ones stay dropped). What it published stays published; its
  /// fresh copies of those blocks stay private.
  void drop_blocks(kv_entry& e);

  auto blocks(request_id id) const -> const std::vector<block_id>&;
  /// The request's entry, or nullptr when it is not tracked.
  auto entry_of(request_id id) -> kv_entry* {
    const auto it = requests_.find(id);
    return it == requests_.end() ? nullptr : &it->second;
  }
  auto entry_of(request_id id) const -> const kv_entry* {
    const auto it = requests_.find(id);
    return it == requests_.end() ? nullptr : &it->second;
  }
  auto source() const -> const block_source& { return cache_; }
  auto options() const -> const kv_cache_options& { return options_; }

private:
  auto grow_blocks(kv_entry& e, std::int32_t num_tokens, bool admission) -> bool;
  void slide_now(kv_entry& e, std::int32_t num_computed);
  void prepare_commit_now(kv_entry& e, std::span<const token_id> prompt, std::span<const token_id> output);
  /// The key of the request's block i (of prompt ++ output), chained to
  /// `parent`; valid until the next call.
  auto key_at(std::uint64_t tenant, block_hash parent, std::span<const token_id> prompt,
              std::span<const token_id> output, std::size_t i) -> block_key_view;
  auto track(request_id id, std::uint64_t tenant, std::int32_t priority, std::span<const block_id> matched,
             block_hash last_hash) -> std::int32_t;

  block_source& cache_;
  kv_cache_options options_;
  std::unordered_map<request_id, kv_entry> requests_;
  std::vector<token_id> scratch_tokens_; ///< key_at's straddling block
  std::vector<block_hash> scratch_hashes_;
};

} // namespace troupe
