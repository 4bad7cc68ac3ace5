// The step log reads back what was written: every field, any tenant id
// (a 64-bit hash, often with its top bit set), any line length.

#include "engine/core/step_log.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fstream>

using namespace troupe;

TEST_CASE("step log: written events read back field for field") {
  testing::temp_dir dir;
  const auto file = dir / "steps.log";
  step_log::setup s;
  s.policy = "vtc";
  s.limits.max_num_seqs = 7;
  s.limits.long_prefill_token_threshold = 64;
  s.limits.max_num_partial_prefills = 2;
  s.limits.prefill_chunk_cost = 0.75;
  s.limits.preemption = preemption_mode::swap;
  s.limits.num_host_blocks = 12;
  s.kv.block_size = 4;
  s.share = 99;
  s.eos_ids = {2, 7};
  request r;
  r.id = 42;
  r.tenant = 0xF123456789ABCDEFull; // a hash of a user name, top bit set
  r.priority = -3;
  r.arrival_s = 0.1 + 0.2; // not a short decimal: must come back exactly
  r.sampling.max_tokens = 9;
  r.sampling.ignore_eos = true;
  r.sampling.stop_token_ids = {5};
  for (int i = 0; i < 5000; ++i) r.prompt.push_back(1000 + i); // a line of ~25 KB
  r.matched_blocks = {3, 4};
  scheduler_output out;
  const std::vector<block_id> table{5, 6};
  out.add_chunk(42, std::span(r.prompt).first(3), 8, table);
  out.scheduled.back().sample = true;
  out.swap_out.push_back({1, 2});
  out.finished = {17};
  step_result res;
  res.sampled.push_back({42, {77, 0.0f, {}, {}}, {}});
  res.sampled.push_back({43, {78, 0.0f, {}, {79, 80}}, {}}); // with two tokens a grammar forced
  {
    step_log::writer w(file, s);
    w.lease(0, std::vector<block_id>{1, 2, 3});
    w.submit(0.5, r, 0);
    auto sibling = r;
    sibling.id = 43;
    sibling.group = 0x8000000000000001ull;
    sibling.choice = 1;
    w.submit(0.5, sibling, 0);
    w.schedule(0.75, 0.75, out);
    w.step(0.75, 0.01, out, res);
    w.shrink(1.0, 2);
    w.abort(1.25, 42);
  }
  step_log::reader rd(file);
  CHECK(rd.config().policy == "vtc");
  CHECK(rd.config().limits.max_num_seqs == 7);
  CHECK(rd.config().limits.long_prefill_token_threshold == 64);
  CHECK(rd.config().limits.max_num_partial_prefills == 2);
  CHECK(rd.config().limits.prefill_chunk_cost == 0.75);
  CHECK(rd.config().limits.preemption == preemption_mode::swap);
  CHECK(rd.config().limits.num_host_blocks == 12);
  CHECK(rd.config().kv.block_size == 4);
  CHECK(rd.config().share == 99);
  CHECK(rd.config().eos_ids == std::vector<token_id>{2, 7});
  auto e = rd.next();
  REQUIRE(e);
  CHECK(e->type == step_log::event::kind::lease);
  CHECK(e->blocks == std::vector<block_id>{1, 2, 3});
  e = rd.next();
  REQUIRE(e);
  CHECK(e->type == step_log::event::kind::submit);
  CHECK(e->t == 0.5);
  CHECK(e->req.id == 42);
  CHECK(e->req.tenant == r.tenant);
  CHECK(e->req.priority == -3);
  CHECK(e->req.arrival_s == r.arrival_s);
  CHECK(e->req.sampling.max_tokens == 9);
  CHECK(e->req.sampling.ignore_eos);
  CHECK(e->req.sampling.stop_token_ids == std::vector<token_id>{5});
  CHECK(e->req.prompt == r.prompt);
  CHECK(e->req.matched_blocks == r.matched_blocks);
  CHECK(e->req.group == 0);
  e = rd.next(); // one of n choices: its group and index come back
  REQUIRE(e);
  CHECK(e->req.id == 43);
  CHECK(e->req.group == 0x8000000000000001ull);
  CHECK(e->req.choice == 1);
  e = rd.next();
  REQUIRE(e);
  CHECK(e->type == step_log::event::kind::schedule);
  CHECK(e->plan == step_log::plan_of(out));
  CHECK(e->plan == "new=- fin=17 out=1>2 in=- chunks=42/8/3/1/a5,6");
  e = rd.next(); // the step's time: a replay paces prefill by it (batch_scheduler::observe_step)
  REQUIRE(e);
  CHECK(e->type == step_log::event::kind::step);
  CHECK(e->t == 0.75);
  CHECK(e->duration == 0.01);
  e = rd.next();
  REQUIRE(e);
  CHECK(e->type == step_log::event::kind::sampled);
  REQUIRE(e->result.sampled.size() == 2);
  CHECK(e->result.sampled[0].result.token == 77);
  CHECK(e->result.sampled[0].result.forced.empty());
  CHECK(e->result.sampled[1].result.token == 78);
  CHECK(e->result.sampled[1].result.forced == std::vector<token_id>{79, 80});
  e = rd.next();
  REQUIRE(e);
  CHECK(e->type == step_log::event::kind::shrink);
  CHECK(e->keep == 2);
  e = rd.next();
  REQUIRE(e);
  CHECK(e->type == step_log::event::kind::abort);
  CHECK(e->req.id == 42);
  CHECK(!rd.next());
}

TEST_CASE("step log: a malformed line is named") {
  testing::temp_dir dir;
  std::ofstream(dir / "bad.log") << "# troupe step log v1\nconfig policy=fcfs share=8\n  \nlease 0 1,2\nsubmit 0.1 0 x\n";
  step_log::reader rd(dir / "bad.log");
  CHECK(rd.next());
  try {
    (void)rd.next();
    FAIL("read a malformed submit");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).ends_with("bad.log:5: submit: expected 11 fields"));
  }
  // A sampled token: <id>:<token>, then forced tokens each after a '+'.
  for (const char* bad : {"7", "7:", "7:-", "7:5+", "7:5++6", "x:5", "7:5+y"}) {
    std::ofstream(dir / "sampled.log") << "# troupe step log v1\nconfig policy=fcfs share=8\nsampled 7:1+2 " << bad << "\n";
    step_log::reader sampled(dir / "sampled.log");
    const std::string said = std::string("sampled: \"") + bad + "\" is not <id>:<token>";
    CHECK_THROWS_WITH((void)sampled.next(), doctest::Contains(said.c_str()));
  }
  std::ofstream(dir / "none.log") << "lease 0 1\n";
  CHECK_THROWS_WITH(step_log::reader(dir / "none.log"), doctest::Contains("none.log:1: expected the config line"));
}
