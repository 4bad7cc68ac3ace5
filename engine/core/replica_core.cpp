#include "engine/core/replica_core.hpp"

#include "base/check.hpp"
#include "policies/registry.hpp"

#include <algorithm>

namespace troupe {

replica_core::replica_core(const replica_core_options& o, std::span<const block_id> lease) {
  TROUPE_CHECK(o.share > 0, "a replica without KV blocks");
  policy_ = policy::make_scheduling_policy(o.scheduling);
  lease_ = std::make_unique<leased_blocks>(o.share);
  lease_->add(lease);
  // A step takes at most one block per running request plus its prefill
  // tokens' worth: keep two steps' worth leased.
  low_water_ = std::min<std::int64_t>(o.share / 2,
                                      o.limits.max_num_seqs + o.limits.max_num_batched_tokens / o.kv.block_size + 1);
  refill_batch_ = static_cast<std::int32_t>(std::max<std::int64_t>(2 * low_water_, 16));
  kv_ = std::make_unique<kv_cache_manager>(*lease_, o.kv);
  core_ = std::make_unique<batch_scheduler>(o.limits, *kv_, *policy_, o.eos_ids);
}

auto replica_core::after_change() -> lease_traffic {
  lease_traffic t;
  // An idle surplus goes back, for the cache and the other replicas.
  if (lease_->num_free() > 3 * low_water_) {
    t.shrunk_to = 2 * low_water_;
    lease_->shrink_to(t.shrunk_to);
  }
  t.ops = lease_->take_outbox();
  t.refill = !refilling_ && (starved_ || lease_->num_free() < low_water_);
  return t;
}

auto replica_core::begin_refill() -> std::int32_t {
  if (refilling_) return 0;
  const std::int64_t room = lease_->capacity() - lease_->num_blocks_held();
  const auto want = static_cast<std::int32_t>(std::min<std::int64_t>(starved_ ? room : refill_batch_, room));
  if (want <= 0) return 0;
  refilling_ = true;
  return want;
}

auto replica_core::refilled(std::span<const block_id> blocks) -> bool {
  refilling_ = false;
  lease_->add(blocks);
  return blocks.empty() && starved_;
}

auto replica_core::may_step(std::int64_t backlog) const -> bool { return backlog <= 16 + 2 * core_->num_running(); }

auto replica_core::report_due(const replica_report& r, double now_s) -> bool {
  if (r.running == last_report_.running && r.waiting == last_report_.waiting &&
      r.submitted == last_report_.submitted && last_report_s_ >= 0 && now_s - last_report_s_ < report_interval_s)
    return false;
  last_report_ = r;
  last_report_s_ = now_s;
  return true;
}

} // namespace troupe
