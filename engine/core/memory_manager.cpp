#include "engine/core/memory_manager.hpp"

namespace troupe {

auto match_prefix(block_source& source, std::uint64_t tenant, std::span<const token_id> tokens,
                  std::int32_t block_size, std::int32_t priority) -> prefix_match {
  prefix_match out;
  const auto bs = static_cast<std::size_t>(block_size);
  const std::size_t usable = tokens.empty() ? 0 : (tokens.size() - 1) / bs;
  for (std::size_t i = 0; i < usable; ++i) {
    const auto k = key_of(tenant, out.last_hash, tokens, i, bs);
    const block_hash h = hash_block(k);
    const auto b = source.acquire_cached(k, h, priority);
    if (!b) break;
    out.blocks.push_back(*b);
    out.last_hash = h;
  }
  return out;
}

auto cached_prefix_blocks(const prefix_cache& cache, std::uint64_t tenant, std::span<const token_id> tokens,
                          std::int32_t block_size) -> std::int32_t {
  const auto bs = static_cast<std::size_t>(block_size);
  const std::size_t usable = tokens.empty() ? 0 : (tokens.size() - 1) / bs;
  block_hash last = 0;
  std::int32_t n = 0;
  for (std::size_t i = 0; i < usable; ++i, ++n) {
    const auto k = key_of(tenant, last, tokens, i, bs);
    last = hash_block(k);
    if (!cache.holds_key(k, last)) break;
  }
  return n;
}

memory_manager::memory_manager(std::int32_t num_blocks, const policy::eviction_policy& eviction)
  : cache_(num_blocks, eviction) {}

auto memory_manager::lease(std::int32_t n, std::int32_t priority) -> std::vector<block_id> {
  std::vector<block_id> out;
  for (std::int32_t i = 0; i < n; ++i) {
    const auto b = cache_.allocate(priority);
    if (!b) break;
    out.push_back(*b);
  }
  return out;
}

auto memory_manager::match(std::uint64_t tenant, std::span<const token_id> tokens, std::int32_t block_size,
                           std::int32_t priority) -> std::vector<block_id> {
  return match_prefix(cache_, tenant, tokens, block_size, priority).blocks;
}

void memory_manager::apply(std::span<const block_op> ops) {
  for (const auto& op : ops) {
    if (op.what == block_op::kind::publish)
      (void)cache_.publish(op.block, op.key, op.hash, op.depth);
    else
      cache_.release(op.block);
  }
}

} // namespace troupe
