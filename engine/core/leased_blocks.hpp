#pragma once
// A replica scheduler's blocks when the device's prefix cache lives in the
// memory manager (an actor): a lease of free blocks it allocates from with
// no round trip, refilled in batches, and an outbox of publishes and
// releases it sends after each step. Prefix matches arrive with a request
// (matched once at admission by the memory manager) through adopt().

#include "engine/core/block_source.hpp"
#include "engine/core/memory_manager.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

class leased_blocks final : public block_source {
public:
  /// capacity: the most blocks one request may need (the replica's share).
  explicit leased_blocks(std::int64_t capacity) : capacity_(capacity) {}

  /// Blocks of a lease (or a refill) from the memory manager.
  void add(std::span<const block_id> blocks);
  /// A block referenced at the memory manager for one of our requests (a
  /// prefix match): its release goes back there.
  void adopt(block_id b) override;
  /// Publishes and releases for the memory manager, oldest first; clears them.
  auto take_outbox() -> std::vector<block_op>;
  /// Free lease blocks beyond `keep`, handed back (their releases queued).
  void shrink_to(std::int64_t keep);
  auto num_free() const -> std::int64_t { return static_cast<std::int64_t>(free_.size()); }
  /// References held: free blocks, ones in use unpublished, and references
  /// at the manager (a block matched by k requests counts k times).
  auto num_held() const -> std::int64_t;
  /// Distinct blocks held: what the replica's share limits.
  auto num_blocks_held() const -> std::int64_t { return num_free() + num_in_use(); }

  /// Distinct blocks in use by requests (allocated, published or matched).
  auto num_in_use() const -> std::int64_t { return num_local_ + num_remote_; }
  auto releases_locally() const -> bool override { return false; }
  auto capacity() const -> std::int64_t override { return capacity_; }
  auto num_available() const -> std::int64_t override { return num_free(); }
  [[nodiscard]] auto allocate(std::int32_t priority) -> std::optional<block_id> override;
  [[nodiscard]] auto acquire_cached(block_key_view, block_hash, std::int32_t) -> std::optional<block_id> override {
    return std::nullopt; // matching happens at the memory manager
  }
  auto publish(block_id b, block_key_view k, block_hash h, std::int32_t depth) -> bool override;
  void release(block_id b) override;
  /// An unpublished block: one more local holder. One at the manager: one
  /// more reference there (queued).
  void share(block_id b) override;
  auto references(block_id b) const -> std::int32_t override;
  void check_invariants() const override;

private:
  std::int64_t capacity_;
  /// The count of block b in `counts` (grown to hold it: ids are a
  /// device's, dense from 0).
  static auto count(std::vector<std::int32_t>& counts, block_id b) -> std::int32_t&;
  static auto count_of(const std::vector<std::int32_t>& counts, block_id b) -> std::int32_t {
    return static_cast<std::size_t>(b) < counts.size() ? counts[static_cast<std::size_t>(b)] : 0;
  }

  std::vector<block_id> free_; ///< leased, unused
  /// By block id: leased, allocated, not published: its holders (requests
  /// whose tables list it); 0 for none. Vectors, not maps: a step touches
  /// a block per running request, and the ids are dense.
  std::vector<std::int32_t> local_;
  std::vector<std::int32_t> remote_; ///< by block id: published or matched: references at the manager
  std::int64_t num_local_ = 0, num_remote_ = 0; ///< blocks with a count in each
  std::int64_t remote_refs_ = 0;                ///< the references at the manager, summed
  std::vector<block_op> outbox_;
};

} // namespace troupe
