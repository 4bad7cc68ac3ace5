#include "engine/core/kv_cache_manager.hpp"

#include "base/check.hpp"
#include "engine/core/memory_manager.hpp"

#include <algorithm>

namespace troupe {

kv_cache_manager::kv_cache_manager(block_source& cache, const kv_cache_options& options)
  : cache_(cache), options_(options) {
  TROUPE_CHECK(options.block_size >= 1 && options.watermark_blocks >= 0, "bad KV cache options");
}

auto kv_cache_manager::begin(request_id id, std::uint64_t tenant, std::int32_t priority,
                             std::span<const token_id> prompt) -> std::int32_t {
  prefix_match m;
  if (options_.enable_prefix_caching) m = match_prefix(cache_, tenant, prompt, options_.block_size, priority);
  return track(id, tenant, priority, m.blocks, m.last_hash);
}

auto kv_cache_manager::begin_matched(request_id id, std::uint64_t tenant, std::int32_t priority,
                                     std::span<const token_id> prompt, std::span<const block_id> matched)
    -> std::int32_t {
  for (const block_id b : matched) cache_.adopt(b);
  // The manager sent the blocks, not their chain hash: hash the prefix here.
  block_hash h = 0;
  for (std::size_t i = 0; i < matched.size(); ++i)
    h = hash_block(key_of(tenant, h, prompt, i, static_cast<std::size_t>(options_.block_size)));
  return track(id, tenant, priority, matched, h);
}

auto kv_cache_manager::fork(const kv_entry& from, request_id id, std::int32_t priority,
                            std::span<const token_id> prompt, std::int32_t num_blocks) -> std::int32_t {
  TROUPE_CHECK(from.num_dropped == 0 && num_blocks >= 0 && num_blocks <= static_cast<std::int32_t>(from.blocks.size()) &&
                   static_cast<std::int64_t>(num_blocks) * options_.block_size < static_cast<std::int64_t>(prompt.size()),
               "a fork shares held blocks of the prompt, never its last token's");
  const auto shared = std::span(from.blocks).first(static_cast<std::size_t>(num_blocks));
  for (const block_id b : shared) cache_.share(b);
  block_hash h = 0;
  if (options_.enable_prefix_caching)
    for (std::size_t i = 0; i < shared.size(); ++i)
      h = hash_block(key_of(from.tenant, h, prompt, i, static_cast<std::size_t>(options_.block_size)));
  return track(id, from.tenant, priority, shared, h);
}

auto kv_cache_manager::track(request_id id, std::uint64_t tenant, std::int32_t priority,
                             std::span<const block_id> matched, block_hash last_hash) -> std::int32_t {
  TROUPE_CHECK(!requests_.contains(id), "request already tracked");
  auto& e = requests_[id];
  e.tenant = tenant;
  e.priority = priority;
  e.blocks.reserve(16);
  e.blocks.assign(matched.begin(), matched.end());
  e.num_published = static_cast<std::int32_t>(matched.size());
  e.last_hash = last_hash;
  return e.num_published * options_.block_size;
}

auto kv_cache_manager::grow_blocks(kv_entry& e, std::int32_t num_tokens, bool admission) -> bool {
  const std::int64_t need = blocks_for(num_tokens, options_.block_size) - static_cast<std::int64_t>(e.blocks.size());
  if (need <= 0) return true;
  const std::int64_t reserve = admission ? options_.watermark_blocks : 0;
  if (cache_.num_available() - need < reserve) return false;
  for (std::int64_t i = 0; i < need; ++i) {
    const auto b = cache_.allocate(e.priority);
    TROUPE_CHECK(b.has_value(), "an available block could not be allocated");
    e.blocks.push_back(*b);
  }
  return true;
}

void kv_cache_manager::commit(kv_entry& e, std::span<const token_id> prompt, std::span<const token_id> output,
                              std::int32_t num_computed) {
  if (!options_.enable_prefix_caching) return;
  const auto bs = static_cast<std::size_t>(options_.block_size);
  const auto full = static_cast<std::int32_t>(static_cast<std::size_t>(num_computed) / bs);
  TROUPE_CHECK(full <= static_cast<std::int32_t>(e.blocks.size()), "computed tokens beyond the block table");
  if (e.num_published >= full) return;
  // The chain's hashes first, fetching what each publish touches, so that
  // a prefill's many blocks wait for memory together rather than in turn.
  auto& hashes = scratch_hashes_;
  hashes.clear();
  block_hash h = e.last_hash;
  for (std::int32_t i = e.num_published; i < full; ++i) {
    if (i == e.next_index) {
      h = e.next_hash;
    } else {
      h = hash_block(key_at(e.tenant, h, prompt, output, static_cast<std::size_t>(i)));
      if (full - e.num_published > 1) cache_.prefetch_publish(e.blocks[static_cast<std::size_t>(i)], h);
    }
    hashes.push_back(h);
  }
  for (const block_hash hi : hashes) {
    const auto i = static_cast<std::size_t>(e.num_published);
    const auto k = key_at(e.tenant, e.last_hash, prompt, output, i);
    e.last_hash = hi;
    // Another request may have published the same content meanwhile: this
    // block then stays private and is freed with the request.
    (void)cache_.publish(e.blocks[i], k, hi, e.num_published);
    ++e.num_published;
  }
}

auto kv_cache_manager::key_at(std::uint64_t tenant, block_hash parent, std::span<const token_id> prompt,
                              std::span<const token_id> output, std::size_t i) -> block_key_view {
  const auto bs = static_cast<std::size_t>(options_.block_size);
  const std::size_t first = i * bs, p = prompt.size();
  if (first + bs <= p) return {tenant, parent, prompt.subspan(first, bs)};
  if (first >= p) return {tenant, parent, output.subspan(first - p, bs)};
  // The one block where the prompt ends and the output begins: copied.
  scratch_tokens_.assign(prompt.begin() + static_cast<std::ptrdiff_t>(first), prompt.end());
  scratch_tokens_.insert(scratch_tokens_.end(), output.begin(), output.begin() + static_cast<std::ptrdiff_t>(first + bs - p));
  return {tenant, parent, scratch_tokens_};
}

void kv_cache_manager::prepare_commit_now(kv_entry& e, std::span<const token_id> prompt,
                                          std::span<const token_id> output) {
  const auto i = static_cast<std::size_t>(e.num_published);
  if (i >= e.blocks.size()) return;
  e.next_hash = hash_block(key_at(e.tenant, e.last_hash, prompt, output, i));
  e.next_index = e.num_published;
  cache_.prefetch_publish(e.blocks[i], e.next_hash);
}

void kv_cache_manager::end(request_id id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return;
  drop_blocks(it->second);
  requests_.erase(it);
}

void kv_cache_manager::slide_now(kv_entry& e, std::int32_t num_computed) {
  const auto bs = options_.block_size;
  // The next token, at position num_computed, attends to positions from
  // num_computed - window + 1 on; the tokens after it to fewer.
  const auto first_needed = static_cast<std::int64_t>(num_computed) - options_.sliding_window_tokens + 1;
  const auto keep_from = static_cast<std::int32_t>(
      std::min<std::int64_t>(first_needed / bs, static_cast<std::int64_t>(e.blocks.size())));
  TROUPE_CHECK(!options_.enable_prefix_caching || keep_from <= e.num_published,
               "a block leaves the window before it is published");
  for (auto i = e.num_dropped; i < keep_from; ++i) {
    auto& b = e.blocks[static_cast<std::size_t>(i)];
    cache_.release(b);
    b = kv_entry::no_block;
  }
  e.num_dropped = std::max(e.num_dropped, keep_from);
}

void kv_cache_manager::drop_blocks(kv_entry& e) {
  auto& blocks = e.blocks;
  cache_.release_all(e.live_blocks()); // tail first: with equal recency, the chain's head outlives its tail
  blocks.resize(static_cast<std::size_t>(e.num_dropped)); // the dropped positions' no_block entries stay
}

auto kv_cache_manager::blocks(request_id id) const -> const std::vector<block_id>& {
  return requests_.at(id).blocks;
}

} // namespace troupe
