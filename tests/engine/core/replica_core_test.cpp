// A replica's logic without its actor: the lease's low-water mark and
// refills (a batch ahead of need; while starved, the share; one at a time;
// an empty answer while starved asked again), an idle surplus handed back,
// backpressure (16 + 2 per running request), and the coalesced load reports.

#include "engine/core/replica_core.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace troupe;

namespace {

auto options() -> replica_core_options {
  replica_core_options o;
  o.limits.max_num_seqs = 4;
  o.limits.max_num_batched_tokens = 32;
  o.kv.block_size = 16;
  o.share = 64;
  o.eos_ids = {2};
  return o;
}

auto blocks(block_id first, int n) -> std::vector<block_id> {
  std::vector<block_id> b(static_cast<std::size_t>(n));
  std::iota(b.begin(), b.end(), first);
  return b;
}

} // namespace

TEST_CASE("the lease is refilled a batch ahead of need, one refill at a time") {
  replica_core r(options(), blocks(0, 5));
  CHECK(r.low_water() == 7); // min(share / 2, max_num_seqs + batched tokens / block + 1)
  auto t = r.after_change();
  CHECK(t.refill); // 5 free, under the low water
  CHECK(t.shrunk_to == -1);
  CHECK(r.begin_refill() == 16); // the batch: max(2 low water, 16)
  CHECK(r.begin_refill() == 0);  // (one in flight)
  CHECK(r.after_change().refill == false);
  CHECK_FALSE(r.refilled(blocks(100, 16)));
  CHECK(r.lease().num_free() == 21);
  t = r.after_change();
  CHECK_FALSE(t.refill);
  CHECK(t.shrunk_to == -1); // (21 is not over 3 low waters)
}

TEST_CASE("an idle surplus goes back to the memory manager") {
  replica_core r(options(), blocks(0, 40));
  const auto t = r.after_change();
  CHECK(t.shrunk_to == 14);
  CHECK(r.lease().num_free() == 14);
  CHECK(t.ops.size() == 26); // (each handed-back block's release)
  CHECK_FALSE(t.refill);
}

TEST_CASE("starved: as many as the share allows; an empty answer is asked again") {
  replica_core r(options(), blocks(0, 10));
  r.set_starved(true);
  CHECK(r.after_change().refill);
  CHECK(r.begin_refill() == 54); // the share's room: 64 - 10
  CHECK(r.refilled({}));         // nothing came while starved: again shortly
  r.set_starved(false);
  CHECK(r.begin_refill() == 16);
  CHECK_FALSE(r.refilled({}));
}

TEST_CASE("backpressure: up to 16 messages plus 2 per running request on their way") {
  replica_core r(options(), blocks(0, 40));
  CHECK(r.may_step(16));
  CHECK_FALSE(r.may_step(17));
  for (request_id id = 1; id <= 3; ++id) {
    request q;
    q.id = id;
    q.prompt = {5, 6, 7};
    q.sampling.max_tokens = 8;
    REQUIRE(r.scheduler().submit(std::move(q)).status == 0);
  }
  (void)r.scheduler().schedule(0.0);
  REQUIRE(r.scheduler().num_running() == 3);
  CHECK(r.may_step(22));
  CHECK_FALSE(r.may_step(23));
}

TEST_CASE("load reports: a count the router acts on goes at once, the rest every 5 ms") {
  replica_core r(options(), blocks(0, 8));
  replica_report rep;
  CHECK(r.report_due(rep, 1.0));      // the first
  CHECK_FALSE(r.report_due(rep, 1.001));
  rep.kv_use = 0.5;                   // (not a count the router acts on)
  CHECK_FALSE(r.report_due(rep, 1.004));
  CHECK(r.report_due(rep, 1.0051));   // the interval passed
  rep.waiting = 1;
  CHECK(r.report_due(rep, 1.0052));   // a count changed
  rep.submitted = 1;
  CHECK(r.report_due(rep, 1.0053));
}
