#include "engine/core/leased_blocks.hpp"

#include "base/check.hpp"

namespace troupe {

void leased_blocks::add(std::span<const block_id> blocks) {
  free_.insert(free_.end(), blocks.begin(), blocks.end());
}

void leased_blocks::adopt(block_id b) {
  ++remote_refs_[b];
}

auto leased_blocks::allocate(std::int32_t) -> std::optional<block_id> {
  if (free_.empty()) return std::nullopt;
  const block_id b = free_.back();
  free_.pop_back();
  in_use_.emplace(b, 1);
  return b;
}

auto leased_blocks::publish(block_id b, block_key_view k, block_hash h, std::int32_t depth) -> bool {
  const auto it = in_use_.find(b);
  TROUPE_CHECK(it != in_use_.end(), "publishing a block not in use");
  // From now on the manager's reference is what keeps it: the lease's one
  // becomes a request's (released through the outbox), and each other
  // holder's a reference of its own there.
  const auto holders = it->second;
  in_use_.erase(it);
  remote_refs_[b] += holders;
  outbox_.push_back({block_op::kind::publish, b, {k.tenant, k.parent, {k.tokens.begin(), k.tokens.end()}}, h, depth});
  for (std::int32_t i = 1; i < holders; ++i) outbox_.push_back({block_op::kind::share, b, {}, 0, 0});
  return true;
}

void leased_blocks::release(block_id b) {
  if (const auto it = in_use_.find(b); it != in_use_.end()) {
    if (--it->second > 0) return; // another request still holds it
    in_use_.erase(it);
    free_.push_back(b); // unpublished: stays in the lease
    return;
  }
  const auto it = remote_refs_.find(b);
  TROUPE_CHECK(it != remote_refs_.end(), "releasing a block the lease does not hold");
  if (--it->second == 0) remote_refs_.erase(it);
  outbox_.push_back({block_op::kind::release, b, {}, 0, 0});
}

void leased_blocks::share(block_id b) {
  if (const auto it = in_use_.find(b); it != in_use_.end()) {
    ++it->second;
    return;
  }
  const auto it = remote_refs_.find(b);
  TROUPE_CHECK(it != remote_refs_.end(), "sharing a block the lease does not hold");
  ++it->second;
  outbox_.push_back({block_op::kind::share, b, {}, 0, 0});
}

auto leased_blocks::references(block_id b) const -> std::int32_t {
  if (const auto it = in_use_.find(b); it != in_use_.end()) return it->second;
  const auto it = remote_refs_.find(b);
  return it == remote_refs_.end() ? 0 : it->second;
}

auto leased_blocks::take_outbox() -> std::vector<block_op> {
  std::vector<block_op> out;
  out.swap(outbox_);
  return out;
}

void leased_blocks::shrink_to(std::int64_t keep) {
  while (num_free() > keep) {
    const block_id b = free_.back();
    free_.pop_back();
    outbox_.push_back({block_op::kind::release, b, {}, 0, 0});
  }
}

auto leased_blocks::num_held() const -> std::int64_t {
  std::int64_t n = num_free() + static_cast<std::int64_t>(in_use_.size());
  for (const auto& [b, refs] : remote_refs_) n += refs;
  return n;
}

void leased_blocks::check_invariants() const {
  for (const auto& [b, n] : remote_refs_) TROUPE_CHECK(n > 0, "a non-positive remote reference count");
  for (const auto& [b, n] : in_use_) TROUPE_CHECK(n > 0, "a non-positive holder count");
  for (const block_id b : free_) TROUPE_CHECK(!in_use_.contains(b), "a leased block is both free and in use");
}

} // namespace troupe
