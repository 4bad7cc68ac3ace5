// The batch scheduler when memory runs short and requests leave early:
// preemption (recompute and swap), shared prefixes, aborts, and random
// operations against every invariant.

#include "tests/engine/core/batch_scheduler_rig.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// Two requests of 3 prompt tokens on 4 blocks of 2 tokens: each holds two
// blocks after two steps, and the third step (position 4) must preempt one;
// FCFS picks the newest, request 2. Request 1 then runs to its end, and the
// step after it is request 2's return, which this returns.
struct preemption_story {
  scheduler_output preempting;        ///< the step that preempted request 2
  std::vector<block_id> victim_table; ///< request 2's blocks then
  scheduler_output comeback;          ///< its first step back
};

auto preempt_and_return(rig& g, const scheduler_limits& lim, tables& t) -> preemption_story {
  preemption_story story;
  auto& s = g.s;
  REQUIRE(submit(s, make_request(1, 3, 4)));
  REQUIRE(submit(s, make_request(2, 3, 4)));
  auto st = s.schedule(0);
  check_step(st, lim, 2, t);
  REQUIRE(st.scheduled.size() == 2);
  CHECK(g.cache.num_available() == 0);
  s.update(st, sampled({{1, 10}, {2, 11}}));
  st = s.schedule(0); // position 3 fits each request's second block
  check_step(st, lim, 2, t);
  REQUIRE(st.scheduled.size() == 2);
  s.update(st, sampled({{1, 12}, {2, 13}}));
  st = s.schedule(0);
  check_step(st, lim, 2, t);
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].id == 1);
  CHECK(s.num_preemptions() == 1);
  CHECK(s.find(2)->state == request_state::preempted);
  s.check_invariants();
  story.preempting = st;
  story.victim_table = t.of[2];
  s.update(st, sampled({{1, 14}}));
  st = s.schedule(0);
  check_step(st, lim, 2, t);
  const auto up = s.update(st, sampled({{1, 15}}));
  CHECK(up[0].finished == finish_reason::length);
  st = s.schedule(0);
  check_step(st, lim, 2, t);
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].id == 2);
  CHECK(st.scheduled[0].reset_blocks); // a fresh table
  CHECK(st.scheduled[0].sample);
  CHECK(st.new_requests.empty()); // the executor already knows it
  story.comeback = st;
  return story;
}

} // namespace

TEST_CASE("batch_scheduler: preemption frees the victim's blocks and recomputes it") {
  scheduler_limits lim{4, 100, 256};
  rig g(lim, 4, {2, 0, false});
  tables t;
  const auto story = preempt_and_return(g, lim, t);
  const auto& st = story.comeback;
  CHECK(story.preempting.swap_out.empty());
  CHECK(st.swap_in.empty());
  CHECK(st.scheduled[0].num_computed_tokens == 0); // prompt ++ its two tokens again
  CHECK(tokens_of(st, 0) == std::vector<token_id>{5, 6, 7, 11, 13});
  g.s.check_invariants();
}

TEST_CASE("batch_scheduler: preemption by swap copies the victim's KV out and back, and resumes it") {
  scheduler_limits lim{4, 100, 256};
  lim.preemption = preemption_mode::swap;
  lim.num_host_blocks = 4;
  lim.first_host_block = 100;
  rig g(lim, 4, {2, 0, false});
  tables t;
  const auto story = preempt_and_return(g, lim, t);
  const auto& out = story.preempting;
  const auto& st = story.comeback;
  // Swapped out in the preempting step: its two blocks (positions 0..3), to host blocks.
  REQUIRE(out.swap_out.size() == 2);
  CHECK(out.swap_in.empty());
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(out.swap_out[i].from == story.victim_table.at(i));
    CHECK(out.swap_out[i].to >= 100);
    CHECK(out.swap_out[i].to < 104);
  }
  CHECK(g.s.num_swap_outs() == 1);
  // Back into the first two of its three fresh blocks, resuming at its
  // next decode token: nothing computed again.
  REQUIRE(st.swap_in.size() == 2);
  CHECK(st.swap_out.empty());
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(st.swap_in[i].from == out.swap_out[i].to);
    CHECK(st.swap_in[i].to == t.of[2][i]);
  }
  CHECK(st.scheduled[0].num_new_blocks == 3);
  CHECK(st.scheduled[0].num_computed_tokens == 4);
  CHECK(tokens_of(st, 0) == std::vector<token_id>{13});
  CHECK(g.s.num_swapped() == 0);
  CHECK(g.s.host_blocks().num_free() == 4);
  g.s.check_invariants();
}

TEST_CASE("batch_scheduler: without host blocks to spare, preemption by swap recomputes; abort frees host blocks") {
  scheduler_limits lim{4, 100, 256};
  lim.preemption = preemption_mode::swap;
  lim.num_host_blocks = 3;
  rig g(lim, 6, {2, 0, false});
  auto& s = g.s;
  for (request_id id = 1; id <= 3; ++id) REQUIRE(submit(s, make_request(id, 3, 8)));
  auto st = s.schedule(0); // 2 blocks each
  s.update(st, sampled({{1, 10}, {2, 11}, {3, 12}}));
  st = s.schedule(0);
  s.update(st, sampled({{1, 10}, {2, 11}, {3, 12}}));
  st = s.schedule(0); // each needs a third block: 3 swapped out (2 host blocks), 2 has 1 left
  CHECK(st.swap_out.size() == 2);
  CHECK(s.find(3)->host_blocks.size() == 2);
  s.update(st, sampled({{1, 10}, {2, 11}}));
  st = s.schedule(0); // positions 5 fit; 6 needs a fourth block for both
  s.update(st, sampled({{1, 10}, {2, 11}}));
  st = s.schedule(0);
  CHECK(s.num_preemptions() == 2);
  CHECK(s.num_swap_outs() == 1); // request 2 needed 3 host blocks, 1 was left: recompute
  CHECK(s.find(2)->host_blocks.empty());
  CHECK(s.find(2)->num_computed_tokens == 0);
  s.check_invariants();
  CHECK(s.abort(3));
  CHECK(s.num_swapped() == 0);
  CHECK(s.host_blocks().num_free() == 3);
  s.check_invariants();
}

TEST_CASE("batch_scheduler: a shared prompt prefix is computed once") {
  scheduler_limits lim{4, 1000, 512};
  rig g(lim, 64, {16, 0, true});
  auto& s = g.s;
  REQUIRE(submit(s, make_request(1, 100, 2, 7)));
  tables t;
  auto st = s.schedule(0);
  t.apply(st);
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].num_tokens == 100);
  s.update(st, sampled({{1, 3}}));
  // Same first 96 tokens (6 blocks), same tenant: prefill starts at 96.
  auto b = make_request(2, 100, 2, 7);
  b.prompt[99] = 4;
  REQUIRE(submit(s, b));
  REQUIRE(submit(s, make_request(3, 100, 2, 8))); // another tenant: no sharing
  st = s.schedule(0);
  t.apply(st);
  REQUIRE(st.scheduled.size() == 3);
  CHECK(st.scheduled[1].id == 2);
  CHECK(st.scheduled[1].num_computed_tokens == 96);
  CHECK(st.scheduled[1].num_tokens == 4);
  CHECK(s.find(2)->num_cached_tokens == 96);
  CHECK(st.scheduled[2].num_computed_tokens == 0);
  CHECK(st.scheduled[0].num_new_blocks == 0); // a decode in its last block: no new block
  CHECK(st.scheduled[1].reset_blocks);
  CHECK(std::equal(t.of[1].begin(), t.of[1].begin() + 6, t.of[2].begin()));
  CHECK(g.cache.num_hits() == 6);
}

TEST_CASE("batch_scheduler: abort in every state frees everything and tells the executor") {
  scheduler_limits lim{4, 100, 256};
  rig g(lim, 10, {4, 0, false});
  auto& s = g.s;
  REQUIRE(submit(s, make_request(1, 8, 4)));
  REQUIRE(submit(s, make_request(2, 8, 4)));
  auto st = s.schedule(0);
  CHECK(g.cache.num_referenced() == 4);
  CHECK(s.abort(1));
  CHECK(!s.abort(1));
  CHECK(g.cache.num_referenced() == 2);
  auto up = s.update(st, sampled({{1, 10}, {2, 11}})); // the aborted request's token is dropped
  REQUIRE(up.size() == 1);
  CHECK(up[0].id == 2);
  st = s.schedule(0);
  CHECK(st.finished == std::vector<request_id>{1});
  REQUIRE(submit(s, make_request(3, 4, 4)));
  CHECK(s.abort(3)); // waiting, never sent: the executor need not hear of it
  s.update(st, sampled({{2, 12}}));
  CHECK(s.schedule(0).finished.empty());
  s.check_invariants();
}

TEST_CASE("batch_scheduler: a request aborted while its step runs, its id reused, is not advanced by that step") {
  rig g({4, 100, 256}, 10, {4, 0, false});
  auto& s = g.s;
  REQUIRE(submit(s, make_request(1, 8, 4)));
  const auto st = s.schedule(0);
  CHECK(s.abort(1));
  REQUIRE(submit(s, make_request(1, 6, 4))); // a new request under the same id
  CHECK(s.update(st, sampled({{1, 10}})).empty()); // the old one's step and token go nowhere
  REQUIRE(s.find(1) != nullptr);
  CHECK(s.find(1)->num_computed_tokens == 0);
  CHECK(s.find(1)->output.empty());
  const auto next = s.schedule(0);
  REQUIRE(next.scheduled.size() == 1);
  CHECK(next.scheduled[0].num_computed_tokens == 0);
  CHECK(next.scheduled[0].num_tokens == 6);
  s.check_invariants();
}

namespace {

auto choice_of(request_id id, std::int32_t prompt_len, std::int32_t max_tokens, std::uint64_t group, std::int32_t choice)
    -> request {
  auto q = make_request(id, prompt_len, max_tokens);
  q.group = group;
  q.choice = choice;
  return q;
}

} // namespace

TEST_CASE("batch_scheduler: n choices compute their prompt once and share its blocks but the last") {
  scheduler_limits lim{8, 256, 256};
  rig g(lim, 64, {4, 0, true});
  zero_executor ex({4, 64, 100, {}, {}});
  tables t;
  shadow_kv kv{4, {}, {}, {}, 0};
  for (std::int32_t c = 0; c < 3; ++c) {
    REQUIRE(submit(g.s, choice_of(10 + static_cast<request_id>(c), 21, 5, 7, c)));
    kv.tokens[10 + static_cast<request_id>(c)] = g.s.find(10 + static_cast<request_id>(c))->prompt;
  }
  // The first choice computes the prompt; the others wait for it.
  auto st = g.s.schedule(0);
  check_step(st, lim, 4, t);
  kv.apply(st, t);
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].id == 10);
  CHECK(st.scheduled[0].num_tokens == 21);
  CHECK(g.s.num_waiting() == 2);
  kv.record(g.s.update(st, ex.execute(st)));
  g.s.check_invariants();
  // Then they share its first 5 blocks (20 tokens) and compute the last
  // prompt token into a block of their own.
  st = g.s.schedule(0);
  check_step(st, lim, 4, t);
  kv.apply(st, t); // each finds the prompt's KV in its table
  REQUIRE(st.scheduled.size() == 3);
  for (const auto& c : st.scheduled) {
    if (c.id == 10) continue;
    CHECK(c.num_computed_tokens == 20);
    CHECK(c.num_tokens == 1);
    CHECK(c.sample);
    const auto& table = t.of[c.id];
    REQUIRE(table.size() == 6);
    for (std::size_t i = 0; i < 5; ++i) CHECK(table[i] == t.of[10][i]);
    CHECK(table[5] != t.of[10][5]);
  }
  for (std::size_t i = 0; i < 5; ++i) CHECK(g.cache.ref_count(t.of[10][i]) == 3);
  CHECK(g.s.num_forks() == 2);
  CHECK(g.s.num_forked_tokens() == 40);
  g.s.check_invariants();
  kv.record(g.s.update(st, ex.execute(st)));
  // The first choice goes: the others keep the blocks.
  CHECK(g.s.abort(10));
  for (std::size_t i = 0; i < 5; ++i) CHECK(g.cache.ref_count(t.of[11][i]) == 2);
  g.s.check_invariants();
  while (g.s.has_work()) {
    st = g.s.schedule(0);
    t.apply(st);
    kv.apply(st, t);
    kv.record(g.s.update(st, ex.execute(st)));
    g.s.check_invariants();
  }
  CHECK(g.cache.num_referenced() == 0);
  CHECK(kv.tokens[11].size() == 26);
  CHECK(kv.tokens[12].size() == 26);
}

TEST_CASE("batch_scheduler: a fork group whose first choice ends before the prompt is done") {
  for (const auto mode : {preemption_mode::recompute, preemption_mode::swap}) {
    CAPTURE(mode == preemption_mode::swap);
    scheduler_limits lim{8, 8, 256}; // 8 tokens a step: a 21-token prompt takes three
    lim.preemption = mode;
    lim.num_host_blocks = 16;
    rig g(lim, 64, {4, 0, false});
    zero_executor ex({4, 64, 100, {}, {}});
    tables t;
    shadow_kv kv{4, {}, {}, {}, 0};
    for (std::int32_t c = 0; c < 3; ++c) {
      REQUIRE(submit(g.s, choice_of(20 + static_cast<request_id>(c), 21, 3, 9, c)));
      kv.tokens[20 + static_cast<request_id>(c)] = g.s.find(20 + static_cast<request_id>(c))->prompt;
    }
    auto step = [&] {
      auto st = g.s.schedule(0);
      check_step(st, lim, 4, t);
      kv.apply(st, t);
      kv.record(g.s.update(st, ex.execute(st)));
      g.s.check_invariants();
      return st;
    };
    auto st = step();
    REQUIRE(st.scheduled.size() == 1); // choice 0's first chunk; the others wait
    CHECK(st.scheduled[0].id == 20);
    // Choice 0 is aborted mid-prompt: choice 1 computes it, choice 2 waits for choice 1.
    CHECK(g.s.abort(20));
    st = step();
    REQUIRE(st.scheduled.size() == 1);
    CHECK(st.scheduled[0].id == 21);
    CHECK(st.scheduled[0].num_computed_tokens == 0);
    st = step();
    st = step(); // choice 1's prompt is done (3 steps of 8)
    CHECK(g.s.find(21)->num_computed_tokens == 21);
    st = step(); // choice 2 forks choice 1's blocks
    CHECK(g.s.num_forks() == 1);
    CHECK(g.s.find(22)->num_cached_tokens == 20);
    while (g.s.has_work()) step();
    CHECK(g.cache.num_referenced() == 0);
    CHECK(kv.tokens[21].size() == 24);
    CHECK(kv.tokens[22].size() == 24);
  }
}

TEST_CASE("batch_scheduler: a forked group preempted for blocks, by recompute and by swap, ends whole") {
  for (const auto mode : {preemption_mode::recompute, preemption_mode::swap}) {
    CAPTURE(mode == preemption_mode::swap);
    scheduler_limits lim{8, 64, 256};
    lim.preemption = mode;
    lim.num_host_blocks = 4;
    // Three choices of 9 prompt tokens and 12 output tokens each need 2
    // shared blocks and 3 of their own: 11; the pool has 8.
    rig g(lim, 8, {4, 0, true});
    zero_executor ex({4, 8, 100, {}, {}});
    tables t;
    shadow_kv kv{4, {}, {}, {}, 0};
    for (std::int32_t c = 0; c < 3; ++c) {
      const auto id = 30 + static_cast<request_id>(c);
      REQUIRE(submit(g.s, choice_of(id, 9, 12, 4, c)));
      kv.tokens[id] = g.s.find(id)->prompt;
    }
    std::int64_t max_shared = 0;
    for (int step = 0; g.s.has_work() && step < 500; ++step) {
      auto st = g.s.schedule(0);
      check_step(st, lim, 4, t);
      kv.apply(st, t); // every chunk finds its prefix's KV, shared or not
      kv.record(g.s.update(st, ex.execute(st)));
      g.s.check_invariants(); // each block's references are the tables that list it
      for (block_id b = 0; b < 8; ++b) max_shared = std::max<std::int64_t>(max_shared, g.cache.ref_count(b));
    }
    CHECK(!g.s.has_work());
    CHECK(g.s.num_forks() >= 2);
    CHECK(max_shared == 3);
    CHECK(g.s.num_preemptions() > 0);
    if (mode == preemption_mode::swap) CHECK(g.s.num_swap_outs() > 0);
    CHECK(g.cache.num_referenced() == 0);
    for (request_id id = 30; id < 33; ++id) CHECK(kv.tokens[id].size() == 9 + 12);
  }
}

TEST_CASE("batch_scheduler: tokens a grammar forced are appended with the sampled one, up to a stop or the limit, "
          "and computed next step as one chunk") {
  scheduler_limits lim{8, 256, 256};
  rig g(lim, 64, {4, 0, true});
  tables t;
  shadow_kv kv{4, {}, {}, {}, 0};
  auto a = make_request(1, 5, 10);
  a.sampling.stop_token_ids = {99};
  auto b = make_request(2, 5, 3);
  for (const auto& q : {a, b}) {
    REQUIRE(submit(g.s, q));
    kv.tokens[q.id] = q.prompt;
  }
  const auto with_forced = [](request_id id, token_id t, std::vector<token_id> forced) {
    return sampled_token{id, {t, 0.0f, {}, std::move(forced)}, {}};
  };
  auto st = g.s.schedule(0);
  check_step(st, lim, 4, t);
  kv.apply(st, t);
  step_result res;
  res.sampled = {with_forced(1, 20, {21, 22, 23}), with_forced(2, 20, {21, 22, 23})};
  auto ups = g.s.update(st, res);
  kv.record(ups);
  g.s.check_invariants();
  REQUIRE(ups.size() == 2);
  CHECK(ups[0].token->forced == std::vector<token_id>{21, 22, 23});
  CHECK(ups[0].finished == finish_reason::none);
  CHECK(g.s.find(1)->output == std::vector<token_id>{20, 21, 22, 23});
  // b's limit is 3 tokens: the third ends it, and the update keeps two forced.
  CHECK(ups[1].token->forced == std::vector<token_id>{21, 22});
  CHECK(ups[1].finished == finish_reason::length);
  // The next step computes a's four new tokens as one chunk, then samples.
  st = g.s.schedule(0);
  check_step(st, lim, 4, t);
  kv.apply(st, t);
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].num_computed_tokens == 5);
  CHECK(tokens_of(st, 0) == std::vector<token_id>{20, 21, 22, 23});
  CHECK(st.scheduled[0].sample);
  // A stop token among the forced ones ends a there, and is kept.
  res.sampled = {with_forced(1, 30, {31, 99, 32})};
  ups = g.s.update(st, res);
  kv.record(ups);
  REQUIRE(ups.size() == 1);
  CHECK(ups[0].token->forced == std::vector<token_id>{31, 99});
  CHECK(ups[0].finished == finish_reason::stop);
  CHECK(g.s.num_jump_forward_tokens() == 7);
  g.s.check_invariants();
  st = g.s.schedule(0);
  CHECK(st.scheduled.empty());
  CHECK(g.s.kv().source().num_available() == 64);
}

TEST_CASE("batch_scheduler: 100,000+ random operations keep every invariant, under every policy") {
  std::int64_t preemptions = 0, swap_outs = 0; // under swap, over the policies
  std::vector<std::tuple<preemption_mode, std::string, std::int32_t>> runs; // and a sliding window
  for (const auto mode : {preemption_mode::recompute, preemption_mode::swap}) {
    for (const auto& name : policy::scheduling_policy_names()) runs.emplace_back(mode, name, 0);
    runs.emplace_back(mode, "fcfs", 7); // blocks leave the window as requests go
  }
  for (const auto& [mode, name, window] : runs) {
    const bool swap = mode == preemption_mode::swap;
    CAPTURE(name);
    CAPTURE(swap);
    CAPTURE(window);
    rng g(11);
    scheduler_limits lim{6, 48, 96, 30, 2000};
    lim.preemption = mode;
    lim.num_host_blocks = 8; // room for some victims, not all: both kinds of preemption happen
    kv_cache_options kv_opts{4, 2, true};
    kv_opts.sliding_window_tokens = window;
    rig r(lim, window > 0 ? 16 : 40, kv_opts, {}, name.c_str()); // a window needs fewer blocks to preempt
    shadow_kv kv{4, {}, {}, {}, window};
    zero_executor ex({4, 40, 60, {}, {}});
    std::map<request_id, std::int32_t> expected; // id -> max_tokens
    std::map<request_id, std::int32_t> got;
    std::map<request_id, std::uint64_t> tenant;
    std::set<request_id> ended_early;
    tables t;
    request_id next = 1;
    int ops = 0;
    scheduler_output st;
    std::vector<request_update> ups;
    for (int step = 0; step < 9000; ++step) {
      if (g.next() % 2 == 0 && next < 900) {
        // Prompts from a few shared prefixes, three tenants; a quarter of
        // them n choices (2 to 4) of one prompt, a fork group.
        auto q = make_request(next, static_cast<std::int32_t>(1 + g.next() % 40),
                              static_cast<std::int32_t>(1 + g.next() % 20), g.next() % 3,
                              static_cast<token_id>(5 + g.next() % 2));
        q.priority = static_cast<std::int32_t>(g.next() % 3);
        const auto n = g.next() % 4 == 0 ? static_cast<std::int32_t>(2 + g.next() % 3) : 1;
        if (n > 1) q.group = next;
        for (std::int32_t c = 0; c < n; ++c) {
          q.id = next;
          q.choice = c;
          const auto ok = r.s.submit(q);
          ++ops;
          if (ok.status == 0) {
            kv.tokens[next] = q.prompt;
            expected[next] = q.sampling.max_tokens;
            tenant[next] = q.tenant;
          } else {
            CHECK(ok.status == 429);
          }
          ++next;
        }
      }
      // Aborts before a step is scheduled, and while it runs.
      const auto maybe_abort = [&] {
        if (g.next() % 25 != 0 || next == 1) return;
        const request_id victim = 1 + g.next() % (next - 1);
        if (r.s.abort(victim)) ended_early.insert(victim);
        ++ops;
      };
      maybe_abort();
      r.s.schedule(step * 0.01, st); // the simulator's way: buffers reused from step to step
      check_step(st, lim, 4, t);
      kv.apply(st, t);
      for (const auto& c : st.scheduled) {
        // (Entries before the window may name blocks since given to others.)
        const auto first = window > 0 ? std::max(0, c.num_computed_tokens - window + 1) / 4 : 0;
        const auto& table = t.of[c.id];
        for (std::size_t i = static_cast<std::size_t>(first); i < table.size(); ++i)
          if (r.cache.is_published(table[i])) REQUIRE(r.cache.tenant_of(table[i]) == tenant[c.id]); // never across tenants
      }
      auto result = ex.execute(st);
      // A third of the samples bring 1 to 6 tokens a grammar forced (jump-forward).
      for (auto& s : result.sampled)
        if (g.next() % 3 == 0)
          for (auto k = 1 + g.next() % 6; k > 0; --k) s.result.forced.push_back(static_cast<token_id>(7 + g.next() % 3));
      maybe_abort();
      r.s.update(st, result, ups);
      kv.record(ups);
      for (const auto& u : ups) {
        got[u.id] += u.token ? 1 + static_cast<std::int32_t>(u.token->forced.size()) : 0;
        if (u.finished != finish_reason::none) CHECK(u.finished == finish_reason::length);
      }
      ops += 2 + static_cast<int>(st.scheduled.size());
      r.s.check_invariants();
    }
    for (int i = 0; i < 20000 && r.s.has_work(); ++i) {
      auto st = r.s.schedule(100);
      t.apply(st);
      kv.apply(st, t);
      kv.record(r.s.update(st, ex.execute(st)));
      ++ops;
    }
    CHECK(ops >= 100'000 / static_cast<int>(policy::scheduling_policy_names().size()));
    CHECK(r.s.num_preemptions() > 0);
    if (swap) {
      preemptions += r.s.num_preemptions();
      swap_outs += r.s.num_swap_outs();
    }
    CHECK(!r.s.has_work());
    CHECK(r.cache.num_referenced() == 0);
    CHECK(r.s.num_forks() > 0);
    CHECK(r.s.num_jump_forward_tokens() > 0);
    for (const auto& [id, max_tokens] : expected)
      if (!ended_early.contains(id)) CHECK(got[id] == max_tokens);
  }
  CHECK(swap_outs > 0);
  CHECK(swap_outs < preemptions); // host blocks ran out at times: recomputed
}

TEST_CASE("batch_scheduler: the watermark never blocks a queue with nothing running") {
  scheduler_limits lim{4, 100, 256};
  rig g(lim, 8, {4, 6, false}); // 6 of 8 blocks held back for growth
  REQUIRE(submit(g.s, make_request(1, 12, 4))); // needs 3 blocks: over 8 - 6, but nothing runs
  auto st = g.s.schedule(0);
  CHECK(st.scheduled.size() == 1);
  REQUIRE(submit(g.s, make_request(2, 4, 2))); // 1 block: 5 available - 1 < 6, and 1 runs: waits
  st = g.s.schedule(0);
  CHECK(st.scheduled.size() == 1);
  CHECK(g.s.num_waiting() == 1);
}

TEST_CASE("batch_scheduler: the executor hears of the last finished request; a blocked head is not re-matched") {
  scheduler_limits lim{4, 100, 256};
  rig g(lim, 8, {4, 0, true});
  zero_executor ex({4, 8, 100, {}, {}});
  REQUIRE(submit(g.s, make_request(1, 16, 1)));
  auto st = g.s.schedule(0);
  g.s.update(st, ex.execute(st));
  CHECK(g.s.num_running() == 0);
  CHECK(g.s.has_work()); // request 1's end is still to be told
  CHECK(g.s.schedule(0).finished == std::vector<request_id>{1});
  CHECK(!g.s.has_work());

  // Request 2 runs on 5 of the 8 blocks (one evicted from request 1's cached
  // chain); request 3 shares the 3 still cached but needs 3 more: it waits,
  // and waiting steps do not query the prefix cache again and again.
  REQUIRE(submit(g.s, make_request(2, 20, 12, 0, 40)));
  st = g.s.schedule(0);
  g.s.update(st, ex.execute(st));
  REQUIRE(submit(g.s, make_request(3, 24, 2)));
  st = g.s.schedule(0);
  const auto queries = g.cache.num_queries();
  CHECK(queries > 0);
  for (int i = 0; i < 5; ++i) {
    g.s.update(st, ex.execute(st));
    st = g.s.schedule(0);
  }
  CHECK(g.s.num_waiting() == 1);
  CHECK(g.cache.num_queries() == queries);
  g.s.check_invariants();
}
