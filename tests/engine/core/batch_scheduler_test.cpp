#include "tests/engine/core/batch_scheduler_rig.hpp"

using namespace troupe;
using namespace troupe::testing;

TEST_CASE("blocks_for: blocks that hold n tokens") {
  CHECK(blocks_for(0, 16) == 0);
  CHECK(blocks_for(16, 16) == 1);
  CHECK(blocks_for(17, 16) == 2);
}

TEST_CASE("batch_scheduler: chunked prefill under the token budget, then decode, FCFS") {
  scheduler_limits lim{4, 10, 256};
  rig g(lim, 100, {4, 0, false});
  auto& s = g.s;
  REQUIRE(submit(s, make_request(1, 25, 3)));
  REQUIRE(submit(s, make_request(2, 3, 2)));
  tables t;
  auto st = s.schedule(0);
  check_step(st, lim, 4, t);
  REQUIRE(st.scheduled.size() == 1); // request 1 takes the whole budget
  CHECK(st.scheduled[0].num_tokens == 10);
  CHECK(!st.scheduled[0].sample);
  CHECK(s.update(st, {}).empty());
  st = s.schedule(0);
  REQUIRE(st.scheduled.size() == 1);
  CHECK(st.scheduled[0].num_computed_tokens == 10);
  s.update(st, {});
  st = s.schedule(0); // 5 prompt tokens of request 1 left: request 2 fits beside it
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].num_tokens == 5);
  CHECK(st.scheduled[0].sample);
  CHECK(st.scheduled[1].id == 2);
  auto up = s.update(st, sampled({{1, 7}, {2, 8}}));
  REQUIRE(up.size() == 2);
  st = s.schedule(0); // both decode the token just sampled
  REQUIRE(st.scheduled.size() == 2);
  CHECK(tokens_of(st, 0) == std::vector<token_id>{7});
  CHECK(st.scheduled[0].num_computed_tokens == 25);
  up = s.update(st, sampled({{1, 9}, {2, 9}}));
  CHECK(up[1].finished == finish_reason::length); // max_tokens 2
  CHECK(s.num_running() == 1);
  CHECK(s.schedule(0).finished == std::vector<request_id>{2});
  s.check_invariants();
}

TEST_CASE("batch_scheduler: long_prefill_token_threshold and max_num_partial_prefills leave room for short prompts") {
  scheduler_limits lim{8, 16, 256};
  lim.long_prefill_token_threshold = 6;
  lim.max_num_partial_prefills = 1;
  rig g(lim, 100, {4, 0, false});
  auto& s = g.s;
  REQUIRE(submit(s, make_request(1, 40, 2)));
  REQUIRE(submit(s, make_request(2, 40, 2)));
  REQUIRE(submit(s, make_request(3, 4, 2)));
  tables t;
  auto st = s.schedule(0);
  check_step(st, lim, 4, t);
  // Request 1 takes 6 tokens (the threshold), not the whole 16; request 2
  // would be a second partial prefill: passed over for request 3, which fits.
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].id == 1);
  CHECK(st.scheduled[0].num_tokens == 6);
  CHECK(st.scheduled[1].id == 3);
  CHECK(st.scheduled[1].num_tokens == 4);
  s.update(st, sampled({{3, 9}}));
  st = s.schedule(0);
  check_step(st, lim, 4, t);
  for (const auto& x : st.scheduled) CHECK(x.id != 2); // still one partial prefill at a time
  s.check_invariants();
}

TEST_CASE("batch_scheduler: decodes go before other requests' prefill chunks") {
  scheduler_limits lim{4, 4, 256};
  rig g(lim, 100, {4, 0, false});
  auto& s = g.s;
  REQUIRE(submit(s, make_request(1, 2, 5)));
  auto st = s.schedule(0);
  s.update(st, sampled({{1, 7}}));
  REQUIRE(submit(s, make_request(2, 30, 5)));
  st = s.schedule(0);
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].id == 1); // the decode
  CHECK(st.scheduled[1].num_tokens == 3); // the prefill gets the rest of the budget
  s.update(st, sampled({{1, 7}}));
  st = s.schedule(0);
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].id == 1); // the decode still first, request 2 mid-prefill after it
  CHECK(st.scheduled[1].id == 2);
}

TEST_CASE("batch_scheduler: max_num_seqs caps admission; the policy orders it") {
  scheduler_limits lim{2, 100, 256};
  rig fcfs(lim, 100, {4, 0, false});
  for (request_id i = 1; i <= 5; ++i) REQUIRE(submit(fcfs.s, make_request(i, 12 - static_cast<int>(i), 4)));
  auto st = fcfs.s.schedule(0);
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].id == 1);
  CHECK(fcfs.s.num_waiting() == 3);
  rig sjf(lim, 100, {4, 0, false}, {}, "sjf");
  for (request_id i = 1; i <= 5; ++i) REQUIRE(submit(sjf.s, make_request(i, 12 - static_cast<int>(i), 4)));
  st = sjf.s.schedule(0);
  REQUIRE(st.scheduled.size() == 2);
  CHECK(st.scheduled[0].id == 5); // shortest prompt first
  CHECK(st.scheduled[1].id == 4);
}

TEST_CASE("batch_scheduler: EOS and stop token ids finish with stop; ignore_eos goes on") {
  scheduler_limits lim{4, 100, 256};
  rig g(lim, 100, {4, 0, false}, {2});
  auto a = make_request(1, 3, 10), b = make_request(2, 3, 10), c = make_request(3, 3, 10);
  b.sampling.ignore_eos = true;
  c.sampling.stop_token_ids = {42};
  REQUIRE((submit(g.s, a) && submit(g.s, b) && submit(g.s, c)));
  auto st = g.s.schedule(0);
  auto up = g.s.update(st, sampled({{1, 2}, {2, 2}, {3, 42}}));
  CHECK(up[0].finished == finish_reason::stop);
  CHECK(up[1].finished == finish_reason::none);
  CHECK(up[2].finished == finish_reason::stop);
  CHECK(g.s.num_running() == 1);
  CHECK(g.cache.num_referenced() == 1);
}

TEST_CASE("batch_scheduler: what can never fit is a 400, a full queue a 429") {
  scheduler_limits lim{4, 100, 64, 2, 20, 50, 10};
  rig g(lim, 16, {4, 0, false});
  CHECK(g.s.check(make_request(1, 50, 10)).empty());
  CHECK(g.s.check(make_request(1, 51, 4)) == "the prompt has 51 tokens, over the limit of 50");
  CHECK(g.s.check(make_request(1, 10, 11)) == "max_tokens (11) is over the limit of 10");
  CHECK(g.s.check(make_request(1, 0, 2)) == "the prompt is empty");
  rig small({4, 100, 64}, 2, {4, 0, false});
  CHECK(small.s.check(make_request(1, 8, 2)) == "prompt + max_tokens needs 3 KV blocks, the cache holds 2");
  rig ctx({4, 100, 64}, 16, {4, 0, false});
  CHECK(ctx.s.check(make_request(1, 60, 5)) == "prompt (60 tokens) + max_tokens (5) exceeds the model's context of 64 tokens");
  CHECK(g.s.submit(make_request(1, 8, 2)).status == 0);
  CHECK(g.s.submit(make_request(2, 8, 2)).status == 0);
  const auto full = g.s.submit(make_request(3, 2, 2)); // 2 waiting requests already
  CHECK(full.status == 429);
  CHECK(g.s.submit(make_request(4, 0, 2)).status == 400);
  rig tokens({4, 100, 64, 10, 20}, 16, {4, 0, false});
  CHECK(tokens.s.submit(make_request(1, 15, 2)).status == 0);
  CHECK(tokens.s.submit(make_request(2, 6, 2)).status == 429); // 21 queued tokens > 20
}
