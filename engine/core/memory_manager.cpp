#include "engine/core/memory_manager.hpp"

namespace troupe {

namespace {

// Walks the chained keys of `tokens`' full blocks, never the last token's
// block (it must be computed to sample), while found(key, hash) holds.
// Returns the hash of the last block found (0: none).
template <class Found>
auto walk_prefix(std::uint64_t tenant, std::span<const token_id> tokens, std::int32_t block_size, Found found)
    -> block_hash {
  const auto bs = static_cast<std::size_t>(block_size);
  const std::size_t usable = tokens.empty() ? 0 : (tokens.size() - 1) / bs;
  block_hash last = 0;
  for (std::size_t i = 0; i < usable; ++i) {
    const auto k = key_of(tenant, last, tokens, i, bs);
    const block_hash h = hash_block(k);
    if (!found(k, h)) break;
    last = h;
  }
  return last;
}

} // namespace

auto match_prefix(block_source& source, std::uint64_t tenant, std::span<const token_id> tokens,
                  std::int32_t block_size, std::int32_t priority) -> prefix_match {
  prefix_match out;
  std::size_t looked = 0;
  out.last_hash = walk_prefix(tenant, tokens, block_size, [&](block_key_view k, block_hash h) {
    ++looked;
    const auto b = source.acquire_cached(k, h, priority);
    if (b) out.blocks.push_back(*b);
    return b.has_value();
  });
  const std::size_t usable = tokens.empty() ? 0 : (tokens.size() - 1) / static_cast<std::size_t>(block_size);
  source.count_unlooked(usable - looked);
  return out;
}

auto cached_prefix_blocks(const prefix_cache& cache, std::uint64_t tenant, std::span<const token_id> tokens,
                          std::int32_t block_size) -> std::int32_t {
  std::int32_t n = 0;
  walk_prefix(tenant, tokens, block_size, [&](block_key_view k, block_hash h) {
    const bool held = cache.holds_key(k, h);
    n += held;
    return held;
  });
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
    else if (op.what == block_op::kind::share)
      cache_.share(op.block);
    else
      cache_.release(op.block);
  }
}

} // namespace troupe
