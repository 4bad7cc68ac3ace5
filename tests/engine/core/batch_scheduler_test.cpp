#include "engine/core/batch_scheduler.hpp"
#include "engine/zero_executor.hpp"
#include "engine/sampling/rng.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace troupe;

namespace {

auto make_request(request_id id, std::int32_t prompt_len, std::int32_t max_tokens) -> request {
  request r;
  r.id = id;
  for (std::int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(5 + (i % 50));
  r.sampling.max_tokens = max_tokens;
  return r;
}

// Every step's output must describe a valid batch: chunks within budget and
// max_num_seqs, block tables covering the chunk, no block in two tables.
void check_step(const scheduler_output& s, const scheduler_limits& lim) {
  CHECK(s.num_scheduled_tokens() <= lim.max_num_batched_tokens);
  CHECK(static_cast<std::int32_t>(s.scheduled.size()) <= lim.max_num_seqs);
  std::set<block_id> seen;
  std::set<request_id> ids;
  for (const auto& c : s.scheduled) {
    CHECK(ids.insert(c.id).second);
    CHECK(!c.tokens.empty());
    CHECK(static_cast<std::int64_t>(c.block_table.size()) >=
          blocks_for(c.num_computed_tokens + static_cast<std::int64_t>(c.tokens.size()), lim.block_size));
    for (auto b : c.block_table) CHECK(seen.insert(b).second);
  }
}

} // namespace

TEST_CASE("block_pool: take, give back, conservation") {
  auto pool = block_pool::of_size(10);
  CHECK(pool.num_free() == 10);
  auto a = pool.take(4);
  REQUIRE(a);
  CHECK(*a == std::vector<block_id>{0, 1, 2, 3});
  CHECK(!pool.take(7));
  CHECK(pool.num_free() == 6);
  pool.give_back(*a);
  CHECK(pool.num_free() == 10);
  CHECK(pool.num_used() == 0);
  pool.add(std::vector<block_id>{40, 41});
  CHECK(pool.num_total() == 12);
  CHECK(blocks_for(0, 16) == 0);
  CHECK(blocks_for(16, 16) == 1);
  CHECK(blocks_for(17, 16) == 2);
}

TEST_CASE("batch_scheduler: chunked prefill under the token budget, then decode, FCFS") {
  scheduler_limits lim{4, 10, 4, 256};
  batch_scheduler s(lim, block_pool::of_size(100), {});
  s.add(make_request(1, 25, 3));
  s.add(make_request(2, 3, 2));
  auto st = s.schedule();
  check_step(st, lim);
  REQUIRE(st.scheduled.size() == 1); // request 1 takes the whole budget
  CHECK(st.scheduled[0].tokens.size() == 10);
  CHECK(!st.scheduled[0].sample);
  CHECK(st.new_requests.size() == 1);
  step_result none;
  CHECK(s.update(st, none).empty());

  st = s.schedule();
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].num_computed_tokens == 10);
  s.update(st, none);

  st = s.schedule(); // 5 prompt tokens of request 1 left: request 2 fits beside it
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].id == 1);
  CHECK(st.scheduled[0].tokens.size() == 5);
  CHECK(st.scheduled[0].sample);
  CHECK(st.scheduled[1].id == 2);
  CHECK(st.scheduled[1].tokens.size() == 3);
  CHECK(st.new_requests.size() == 1);
  step_result r;
  r.sampled = {{1, {7, 0.0f, {}}}, {2, {8, 0.0f, {}}}};
  auto up = s.update(st, r);
  REQUIRE(up.size() == 2);
  CHECK(up[0].finished == finish_reason::none);

  st = s.schedule(); // both decode one token: the one just sampled
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].tokens == std::vector<token_id>{7});
  CHECK(st.scheduled[0].num_computed_tokens == 25);
  CHECK(st.scheduled[1].tokens == std::vector<token_id>{8});
  r.sampled = {{1, {9, 0.0f, {}}}, {2, {9, 0.0f, {}}}};
  up = s.update(st, r);
  CHECK(up[1].finished == finish_reason::length); // max_tokens 2
  CHECK(s.num_running() == 1);
  st = s.schedule();
  CHECK(st.finished == std::vector<request_id>{2});
}

TEST_CASE("batch_scheduler: max_num_seqs caps admission") {
  scheduler_limits lim{2, 100, 4, 256};
  batch_scheduler s(lim, block_pool::of_size(100), {});
  for (request_id i = 1; i <= 5; ++i) s.add(make_request(i, 2, 4));
  auto st = s.schedule();
  CHECK(st.scheduled.size() == 2);
  CHECK(s.num_waiting() == 3);
}

TEST_CASE("batch_scheduler: EOS and stop token ids finish with stop; ignore_eos goes on") {
  scheduler_limits lim{4, 100, 4, 256};
  batch_scheduler s(lim, block_pool::of_size(100), {2});
  auto a = make_request(1, 3, 10);
  auto b = make_request(2, 3, 10);
  b.sampling.ignore_eos = true;
  auto c = make_request(3, 3, 10);
  c.sampling.stop_token_ids = {42};
  s.add(a);
  s.add(b);
  s.add(c);
  auto st = s.schedule();
  step_result r;
  r.sampled = {{1, {2, 0.0f, {}}}, {2, {2, 0.0f, {}}}, {3, {42, 0.0f, {}}}};
  auto up = s.update(st, r);
  CHECK(up[0].finished == finish_reason::stop);
  CHECK(up[1].finished == finish_reason::none);
  CHECK(up[2].finished == finish_reason::stop);
  CHECK(s.num_running() == 1);
  CHECK(s.blocks().num_used() == 1);
}

TEST_CASE("batch_scheduler: check() refuses what can never fit") {
  scheduler_limits lim{4, 100, 4, 64};
  batch_scheduler s(lim, block_pool::of_size(16), {});
  CHECK(s.check(make_request(1, 60, 4)).empty()); // 63 positions hold KV: 16 blocks
  CHECK(s.check(make_request(1, 60, 5)) ==
        "prompt (60 tokens) + max_tokens (5) exceeds the model's context of 64 tokens");
  batch_scheduler small(lim, block_pool::of_size(2), {});
  CHECK(small.check(make_request(1, 8, 2)) == "prompt + max_tokens needs 3 KV blocks, the cache holds 2");
  CHECK(s.check(make_request(1, 0, 2)) == "the prompt is empty");
}

TEST_CASE("batch_scheduler: preemption frees the newest request's blocks and recomputes it") {
  scheduler_limits lim{4, 100, 2, 256};
  batch_scheduler s(lim, block_pool::of_size(4), {});
  s.add(make_request(1, 3, 4)); // 2 blocks now, up to 3
  s.add(make_request(2, 3, 4)); // 2 blocks now
  auto st = s.schedule();
  REQUIRE(st.scheduled.size() == 2);
  CHECK(s.blocks().num_free() == 0);
  step_result r;
  r.sampled = {{1, {10, 0.0f, {}}}, {2, {11, 0.0f, {}}}};
  s.update(st, r);
  // Request 1's next token (position 3) fits its second block; request 2 too.
  st = s.schedule();
  REQUIRE(st.scheduled.size() == 2);
  r.sampled = {{1, {12, 0.0f, {}}}, {2, {13, 0.0f, {}}}};
  s.update(st, r);
  // Position 4 needs a third block each: request 2 is preempted for request 1.
  st = s.schedule();
  check_step(st, lim);
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].id == 1);
  CHECK(s.num_preemptions() == 1);
  CHECK(s.num_waiting() == 1);
  r.sampled = {{1, {14, 0.0f, {}}}};
  s.update(st, r);
  st = s.schedule();
  r.sampled = {{1, {15, 0.0f, {}}}};
  auto up = s.update(st, r);
  CHECK(up[0].finished == finish_reason::length);
  // Request 2 comes back and recomputes prompt ++ its two tokens.
  st = s.schedule();
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].id == 2);
  CHECK(st.scheduled[0].num_computed_tokens == 0);
  CHECK(st.scheduled[0].tokens == std::vector<token_id>{5, 6, 7, 11, 13});
  CHECK(st.scheduled[0].sample);
  CHECK(st.new_requests.empty()); // the executor already knows it
}

TEST_CASE("batch_scheduler: abort frees blocks at once and tells the executor") {
  scheduler_limits lim{4, 100, 4, 256};
  batch_scheduler s(lim, block_pool::of_size(10), {});
  s.add(make_request(1, 8, 4));
  s.add(make_request(2, 8, 4));
  auto st = s.schedule();
  CHECK(s.blocks().num_used() == 4);
  CHECK(s.abort(1));
  CHECK(!s.abort(1));
  CHECK(s.blocks().num_used() == 2);
  step_result r;
  r.sampled = {{1, {10, 0.0f, {}}}, {2, {11, 0.0f, {}}}};
  auto up = s.update(st, r); // the aborted request's token is dropped
  REQUIRE(up.size() == 1);
  CHECK(up[0].id == 2);
  st = s.schedule();
  CHECK(st.finished == std::vector<request_id>{1});
  s.add(make_request(3, 4, 4));
  CHECK(s.abort(3)); // waiting, never sent: the executor need not hear of it
  r.sampled = {{2, {12, 0.0f, {}}}};
  s.update(st, r);
  CHECK(s.schedule().finished.empty());
}

TEST_CASE("batch_scheduler: random workloads keep blocks conserved and finish everything") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    rng g(seed);
    scheduler_limits lim{static_cast<std::int32_t>(1 + g.next() % 8),
                         static_cast<std::int32_t>(1 + g.next() % 40),
                         static_cast<std::int32_t>(1 + g.next() % 8), 96};
    const auto pool_size = static_cast<std::int32_t>(96 / lim.block_size + 1 + g.next() % 40);
    batch_scheduler s(lim, block_pool::of_size(pool_size), {});
    zero_executor ex({lim.block_size, pool_size, 100, {}, {}});
    std::map<request_id, std::int32_t> expected; // id -> max_tokens
    std::map<request_id, std::int32_t> got;
    std::set<request_id> aborted;
    request_id next = 1;
    for (int step = 0; step < 3000 && (next <= 40 || s.has_work()); ++step) {
      if (next <= 40 && g.next() % 3 == 0) {
        auto r = make_request(next, static_cast<std::int32_t>(1 + g.next() % 40),
                              static_cast<std::int32_t>(1 + g.next() % 30));
        REQUIRE(s.check(r).empty());
        expected[next] = r.sampling.max_tokens;
        s.add(std::move(r));
        ++next;
      }
      if (g.next() % 50 == 0 && next > 1) {
        const request_id victim = 1 + g.next() % (next - 1);
        if (s.abort(victim)) aborted.insert(victim);
      }
      auto st = s.schedule();
      check_step(st, lim);
      for (const auto& u : s.update(st, ex.execute(st))) {
        got[u.id] += static_cast<std::int32_t>(u.tokens.size());
        if (u.finished != finish_reason::none) CHECK(u.finished == finish_reason::length);
      }
      CHECK(s.blocks().num_free() + s.blocks().num_used() == pool_size);
    }
    CHECK(!s.has_work());
    CHECK(s.blocks().num_used() == 0);
    for (const auto& [id, max_tokens] : expected)
      if (!aborted.contains(id)) CHECK(got[id] == max_tokens);
  }
}
