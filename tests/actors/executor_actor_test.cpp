// The executor actor over a real executor (the zero executor): a step sent
// to it comes back with the samples the executor itself gives for the same
// step, one per chunk that asked for one; steps of two executor actors run
// at once, each on a thread of its own (a detached actor: a step blocks
// for its whole compute without holding CAF's scheduler).

#include "actors/executor_actor.hpp"
#include "actors/wire.hpp"
#include "engine/core/replica_core.hpp"
#include "engine/zero_executor.hpp"
#include "tests/actors/replica_rig.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <numeric>

using namespace troupe;
using namespace troupe::testing;

namespace {

auto options(std::chrono::microseconds step_time = {}) -> zero_executor_options {
  zero_executor_options zo;
  zo.block_size = k_block_size;
  zo.num_kv_blocks = k_blocks;
  zo.vocab_size = 1000;
  zo.avoid = {2};
  zo.step_time = step_time;
  return zo;
}

/// A replica core over 64 blocks, whose steps are real ones.
auto a_core() -> std::unique_ptr<replica_core> {
  replica_core_options o;
  o.kv.block_size = k_block_size;
  o.share = 64;
  std::vector<block_id> lease(64);
  std::iota(lease.begin(), lease.end(), 0);
  return std::make_unique<replica_core>(o, lease);
}

/// Its first step: two requests' prefill.
auto first_step(replica_core& core) -> scheduler_output {
  REQUIRE(core.scheduler().submit(test_request(1, {5, 6, 7})).status == 0);
  REQUIRE(core.scheduler().submit(test_request(2, {8, 9})).status == 0);
  return core.scheduler().schedule(0.0);
}

auto run(caf::scoped_actor& self, const executor_actor& exec, step_ptr step) -> step_result {
  step_result out;
  self->request(exec, caf::infinite, execute_atom_v, std::move(step))
      .receive([&](step_result& r) { out = std::move(r); }, [](caf::error& e) { FAIL(to_string(e)); });
  return out;
}

} // namespace

TEST_CASE("a step through the actor samples as the executor itself does") {
  caf::actor_system_config cfg;
  add_wire_types(cfg);
  caf::actor_system sys{cfg};
  const auto core = a_core();
  const step_ptr step = std::make_shared<const scheduler_output>(first_step(*core));
  REQUIRE(step->scheduled.size() == 2);
  zero_executor direct(options());
  const auto expected = direct.execute(*step);
  auto exec = spawn_executor(sys, std::make_shared<zero_executor>(options()));
  caf::scoped_actor self{sys};
  const auto got = run(self, exec, step);
  REQUIRE(got.sampled.size() == expected.sampled.size());
  CHECK(got.sampled.size() == 2);
  for (std::size_t i = 0; i < got.sampled.size(); ++i) {
    CHECK(got.sampled[i].id == expected.sampled[i].id);
    CHECK(got.sampled[i].result.token == expected.sampled[i].result.token);
    CHECK(got.sampled[i].result.token != 2); // (never an avoided id)
  }
  caf::anon_send_exit(exec, caf::exit_reason::user_shutdown);
}

TEST_CASE("two executor actors step at once, each on its own thread") {
  caf::actor_system_config cfg;
  add_wire_types(cfg);
  cfg.set("scheduler.max-threads", std::size_t{1}); // (one scheduler thread: detached actors need none of it)
  caf::actor_system sys{cfg};
  const auto core = a_core();
  const step_ptr step = std::make_shared<const scheduler_output>(first_step(*core));
  const auto step_time = std::chrono::milliseconds(1000);
  auto a = spawn_executor(sys, std::make_shared<zero_executor>(options(step_time)));
  auto b = spawn_executor(sys, std::make_shared<zero_executor>(options(step_time)));
  caf::scoped_actor self{sys};
  const auto start = std::chrono::steady_clock::now();
  int answered = 0;
  self->send(a, execute_atom_v, step);
  self->send(b, execute_atom_v, step);
  for (int i = 0; i < 2; ++i)
    self->receive([&](step_result& r) { answered += r.sampled.empty() ? 0 : 1; }, [](caf::error& e) { FAIL(to_string(e)); });
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(answered == 2);
  // Serialized, two steps take 2 s at least (each sleeps 1 s); at once, about 1.
  CHECK(took < std::chrono::milliseconds(1900));
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}
