#include "engine/core/leased_blocks.hpp"

#include "base/check.hpp"

#include <algorithm>

namespace troupe {

auto leased_blocks::count(std::vector<std::int32_t>& counts, block_id b) -> std::int32_t& {
  const auto i = static_cast<std::size_t>(b);
  if (i >= counts.size()) counts.resize(std::max(i + 1, 2 * counts.size()), 0);
  return counts[i];
}

void leased_blocks::add(std::span<const block_id> blocks) {
  free_.insert(free_.end(), blocks.begin(), blocks.end());
}

void leased_blocks::adopt(block_id b) {
  if (count(remote_, b)++ == 0) ++num_remote_;
  ++remote_refs_;
}

auto leased_blocks::allocate(std::int32_t) -> std::optional<block_id> {
  if (free_.empty()) return std::nullopt;
  const block_id b = free_.back();
  free_.pop_back();
  count(local_, b) = 1;
  ++num_local_;
  return b;
}

auto leased_blocks::publish(block_id b, block_key_view k, block_hash h, std::int32_t depth) -> bool {
  auto& holders = count(local_, b);
  TROUPE_CHECK(holders > 0, "publishing a block not in use");
  // From now on the manager's reference is what keeps it: the lease's one
  // becomes a request's (released through the outbox), and each other
  // holder's a reference of its own there.
  const auto n = holders;
  holders = 0;
  --num_local_;
  if (count(remote_, b) == 0) ++num_remote_;
  count(remote_, b) += n;
  remote_refs_ += n;
  outbox_.push_back({block_op::kind::publish, b, {k.tenant, k.parent, {k.tokens.begin(), k.tokens.end()}}, h, depth});
  for (std::int32_t i = 1; i < n; ++i) outbox_.push_back({block_op::kind::share, b, {}, 0, 0});
  return true;
}

void leased_blocks::release(block_id b) {
  if (auto& local = count(local_, b); local > 0) {
    if (--local > 0) return; // another request still holds it
    --num_local_;
    free_.push_back(b); // unpublished: stays in the lease
    return;
  }
  auto& remote = count(remote_, b);
  TROUPE_CHECK(remote > 0, "releasing a block the lease does not hold");
  if (--remote == 0) --num_remote_;
  --remote_refs_;
  outbox_.push_back({block_op::kind::release, b, {}, 0, 0});
}

void leased_blocks::share(block_id b) {
  if (auto& local = count(local_, b); local > 0) {
    ++local;
    return;
  }
  auto& remote = count(remote_, b);
  TROUPE_CHECK(remote > 0, "sharing a block the lease does not hold");
  ++remote;
  ++remote_refs_;
  outbox_.push_back({block_op::kind::share, b, {}, 0, 0});
}

auto leased_blocks::references(block_id b) const -> std::int32_t {
  if (const auto local = count_of(local_, b); local > 0) return local;
  return count_of(remote_, b);
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

auto leased_blocks::num_held() const -> std::int64_t { return num_free() + num_local_ + remote_refs_; }

void leased_blocks::check_invariants() const {
  std::int64_t local = 0, remote = 0, refs = 0;
  for (const auto n : local_) {
    TROUPE_CHECK(n >= 0, "a negative holder count");
    local += n > 0 ? 1 : 0;
  }
  for (const auto n : remote_) {
    TROUPE_CHECK(n >= 0, "a negative remote reference count");
    remote += n > 0 ? 1 : 0;
    refs += n;
  }
  TROUPE_CHECK(local == num_local_ && remote == num_remote_ && refs == remote_refs_, "the lease's counts disagree");
  for (const block_id b : free_) TROUPE_CHECK(count_of(local_, b) == 0, "a leased block is both free and in use");
}

} // namespace troupe
