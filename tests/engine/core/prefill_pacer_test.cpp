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
  CHECK(p.allowance() == 0); // the decode step's 10 ms saved, less 10 ms over this one's share: 10 ms
                             // with the next step's, short of min_chunk's 12.8 ms
  CHECK_FALSE(p.probe());
  p.observe(8, 0, 0.010);
  CHECK(p.allowance() == 100); // 20 ms of credit: 100 tokens
  p.observe(8, 0, 0.010);
  CHECK(p.allowance() == 114); // saved up to min_chunk's 12.8 ms, and this step's 10
  prefill_pacer twice(2.0, 2048);
  twice.observe(8, 0, 0.010);
  twice.observe(8, 100, 0.030);
  CHECK(twice.allowance() == 200); // 20 ms a step; the 20 ms saved paid the chunk
  // Long context: 10 ms a token now (the latest chunk weighs twice the one
  // before: 5.7 ms), 640 ms spent.
  p.observe(8, 64, 0.650);
  CHECK(p.allowance() == 0); // decode alone until the 630 ms over its share are repaid...
  for (int i = 0; i < 78; ++i) p.observe(8, 0, 0.010);
  CHECK(p.allowance() == 0); // ...and 200 ms saved (a lone prompt's step: less than min_chunk's 365 ms)
  for (int i = 0; i < 12; ++i) p.observe(8, 0, 0.010);
  CHECK(p.allowance() == 36); // 210 ms / 5.7 ms; the credit stays capped there
  p.observe(8, 0, 0.010);
  CHECK(p.allowance() == 36);
  prefill_pacer cheap(1.0, 64); // a GPU-like ratio: capped by the step's budget
  cheap.observe(8, 0, 0.010);
  cheap.observe(0, 1000, 0.001);
  CHECK(cheap.allowance() == 64);
  prefill_pacer same(1.0, 2048); // deterministic in what it is fed
  same.observe(8, 0, 0.010);
  same.observe(8, 100, 0.030);
  for (int i = 0; i < 2; ++i) same.observe(8, 0, 0.010);
  same.observe(8, 64, 0.650);
  for (int i = 0; i < 91; ++i) same.observe(8, 0, 0.010);
  CHECK(same.allowance() == p.allowance());
}

TEST_CASE("prefill_pacer: decode steps just after a chunk are charged its after-effects, later ones measure decodes") {
  // (Times in 64ths of a second: exact sums.) A decode step takes D; a
  // chunk of 1024 tokens 3D more: D over the share saved and its own.
  constexpr double D = 1.0 / 64;
  const auto chunked = [&] {
    prefill_pacer p(1.0, 2048);
    p.observe(8, 0, D);
    p.observe(8, 1024, 4 * D); // credit -D
    return p;
  };
  const auto after = [&](std::initializer_list<double> steps) {
    auto p = chunked();
    for (const double s : steps) p.observe(8, 0, s, true);
    return p.allowance();
  };
  CHECK(after({D, D}) == 682);                 // D saved, D this step's: 2D / (3D / 1024)
  CHECK(after({1.5 * D, 1.5 * D}) == 341);     // charged D / 2 each: D of credit
  CHECK(after({1.5 * D, 0.5 * D}) == 682);     // noise both ways is no charge on average
  CHECK(after({2 * D, 2 * D, 2 * D}) == 0); // three steps after a chunk are charged (0.9 of a share at most)...
  CHECK(after({2 * D, 2 * D, 2 * D, 2 * D}) > 0); // ...the fourth measures the decodes
  // Later decode steps measure the decodes: a batch whose steps grow (its
  // contexts lengthen) while a long prompt prefills is not the prefill's
  // doing, and the prefill keeps advancing.
  auto g = chunked();
  int chunks = 0;
  double step = 0.010;
  for (int i = 0; i < 400; ++i) {
    step *= 1.005; // 10 ms to 74 ms over the run
    const auto allow = g.allowance();
    if (allow > 0) {
      ++chunks;
      g.observe(8, allow, step + 0.0002 * allow, true);
    } else {
      g.observe(8, 0, step, true);
    }
  }
  CHECK(chunks > 100); // about every other step: each buys a step's share
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
  CHECK(s.pacer().allowance() <= 114); // a step's 10 ms and min_chunk's 12.8 ms saved, at 0.2 ms a token
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
