// The prefill pacer alone (its arithmetic on measured steps), and in the
// batch scheduler: a long prompt beside decodes takes what the pacer allows,
// and leaves waiting requests half of the step.

#include "tests/engine/core/batch_scheduler_rig.hpp"

using namespace troupe;
using namespace troupe::testing;

TEST_CASE("prefill_pacer: a decoding step's prefill costs about `cost` decode steps, as measured") {
  prefill_pacer off(0, 2048);
  off.observe(8, 0, 0.010);
  off.observe(8, 100, 0.030);
  CHECK(off.allowance() == 2048); // no pacing
  prefill_pacer p(1.0, 2048);
  CHECK(p.allowance() == prefill_pacer::first_chunk); // nothing measured yet
  CHECK(p.probe());                                    // decodes alone first
  p.observe(8, 0, 0.010);                              // a decode step: 10 ms
  CHECK(p.allowance() == prefill_pacer::first_chunk);  // no prefill token measured yet
  p.observe(8, 100, 0.030);                            // 20 ms more for 100 tokens: 0.2 ms a token
  CHECK(p.allowance() == 50);                          // 10 ms of them
  CHECK_FALSE(p.probe());
  prefill_pacer twice(2.0, 2048);
  twice.observe(8, 0, 0.010);
  twice.observe(8, 100, 0.030);
  CHECK(twice.allowance() == 200); // 20 ms of credit, 20 ms this step
  p.observe(8, 50, 0.510); // long context: 10 ms a token now, 500 ms spent
  CHECK(p.allowance() == 0); // decode alone until the 490 ms over its share are repaid...
  for (int i = 0; i < 48; ++i) p.observe(8, 0, 0.010);
  CHECK(p.allowance() == 0);
  p.observe(8, 0, 0.010); // ...49 decode steps
  CHECK(p.allowance() == 1); // 10 ms / 5.1 ms a token (the latest weigh half)
  prefill_pacer cheap(1.0, 64); // a GPU-like ratio: capped by the step's budget
  cheap.observe(8, 0, 0.010);
  cheap.observe(0, 1000, 0.001);
  CHECK(cheap.allowance() == 64);
  prefill_pacer same(1.0, 2048); // deterministic in what it is fed
  same.observe(8, 0, 0.010);
  same.observe(8, 100, 0.030);
  same.observe(8, 50, 0.510);
  for (int i = 0; i < 49; ++i) same.observe(8, 0, 0.010);
  CHECK(same.allowance() == p.allowance());
}

TEST_CASE("batch_scheduler: paced prefill beside decodes, and waiting requests get half of the rest") {
  scheduler_limits lim{8, 512, 4096};
  lim.prefill_chunk_cost = 1.0;
  rig g(lim, 1000, {4, 0, false});
  auto& s = g.s;
  tables t;
  REQUIRE(submit(s, make_request(1, 4, 100))); // a short stream
  auto st = s.schedule(0);
  check_step(st, lim, 4, t);
  s.update(st, sampled({{1, 7}}));
  s.observe_step(0.001); // its prefill: 4 tokens in 1 ms
  REQUIRE(submit(s, make_request(2, 3000, 2))); // a long prompt arrives
  const auto prefill_of = [](const scheduler_output& o) {
    std::int64_t n = 0;
    for (const auto& c : o.scheduled)
      if (c.id != 1) n += c.num_tokens;
    return n;
  };
  // It prefills beside the stream's decodes (10 ms a step, 0.2 ms more a
  // prefill token): the first step decodes alone, to measure them; the
  // admission's chunk is the budget's; the chunks after it are paced.
  int probes = 0;
  for (int i = 0; i < 12; ++i) {
    const bool running = s.find(2) != nullptr && s.find(2)->num_computed_tokens > 0;
    const bool probe = s.pacer().probe();
    const auto allow = s.pacer().allowance();
    st = s.schedule(0);
    check_step(st, lim, 4, t);
    CHECK(st.scheduled[0].id == 1);
    if (probe) CHECK(prefill_of(st) == 0);
    if (running) CHECK(prefill_of(st) <= allow);
    probes += probe;
    s.update(st, sampled({{1, 7}}));
    s.observe_step(0.010 + 0.0002 * static_cast<double>(prefill_of(st)));
  }
  CHECK(probes == 1);
  CHECK(s.pacer().allowance() <= 60); // 10 ms / 0.2 ms = 50, and the credit's
  // A short prompt waits: the long one's chunk leaves it half of what the
  // pacer allows, and it is admitted.
  REQUIRE(submit(s, make_request(3, 20, 2)));
  for (int i = 0; i < 4 && s.find(3)->num_computed_tokens == 0; ++i) {
    st = s.schedule(0);
    check_step(st, lim, 4, t);
    s.update(st, sampled({{1, 7}}));
    s.observe_step(0.010 + 0.0002 * static_cast<double>(prefill_of(st)));
  }
  CHECK(s.find(3)->num_computed_tokens > 0);
  s.check_invariants();
}
