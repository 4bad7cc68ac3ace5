// A replica's scheduler actor, real (over a zero executor and a memory
// manager): a submission is admitted and streams to its sink until its
// length; one that can never run is a 400, one past the bounded queue a 429;
// an abort ends a request at once; an evacuated replica ends every request
// with an error (its sinks retry elsewhere) and refuses submissions until it
// steps again.

#include "actors/wire.hpp"
#include "tests/actors/replica_rig.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <thread>

using namespace troupe;
using namespace troupe::testing;

namespace {

struct replica_rig {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  server_metrics metrics{nullptr, "tiny", "", 1, {"cpu:0"}};
  server_status status;
  replica_handles replica;

  explicit replica_rig(scheduler_limits limits = {}) {
    add_wire_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    replica = start_test_replica(*sys, metrics, status, 0, router_actor{}, limits);
  }
  ~replica_rig() {
    caf::anon_send_exit(replica.scheduler, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(replica.memory, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
  }

  struct submitted {
    admission answer;
    std::shared_ptr<sink_log> log = std::make_shared<sink_log>();
    sink_actor sink;
  };
  auto submit(request r) -> submitted {
    submitted s;
    auto undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
    s.sink = sys->spawn(collecting_sink, s.log, undelivered);
    caf::scoped_actor self{*sys};
    self->request(replica.scheduler, caf::infinite, submit_atom_v, std::move(r), s.sink,
                  std::chrono::steady_clock::now(), undelivered)
        .receive([&](admission& a) { s.answer = std::move(a); },
                 [&](caf::error& e) { s.answer = admission{-1, to_string(e)}; });
    return s;
  }
};

} // namespace

TEST_CASE("a submission is admitted and streams to its sink until its length") {
  replica_rig rig;
  const auto s = rig.submit(test_request(1, {5, 6, 7}, 6));
  CHECK(s.answer.status == 0);
  CHECK(s.log->wait_finished() == finish_reason::length);
  CHECK(s.log->tokens == 6);
}

TEST_CASE("a request that can never run is a 400; past the bounded queue, a 429") {
  scheduler_limits limits;
  limits.max_model_len = 64;
  limits.max_waiting_requests = 1;
  limits.max_num_seqs = 1;
  replica_rig rig(limits);
  std::vector<token_id> huge(100, 5);
  const auto never = rig.submit(test_request(1, huge));
  CHECK(never.answer.status == 400);
  CHECK_FALSE(never.answer.message.empty());
  // Hung (no step takes it from the queue), one waits: the next does not fit.
  caf::anon_send(rig.replica.scheduler, fault_atom_v, std::string("hang"));
  const auto a = rig.submit(test_request(2, {5, 6}, 2));
  const auto b = rig.submit(test_request(3, {5, 6}, 2));
  CHECK(a.answer.status == 0);
  CHECK(b.answer.status == 429);
  caf::anon_send(rig.replica.scheduler, fault_atom_v, std::string("recover"));
  CHECK(a.log->wait_finished() == finish_reason::length);
}

TEST_CASE("an abort ends a request at once") {
  replica_rig rig;
  caf::anon_send(rig.replica.scheduler, fault_atom_v, std::string("hang")); // (no step runs meanwhile)
  const auto s = rig.submit(test_request(1, {5, 6, 7}, 1000));
  INFO(s.answer.message);
  REQUIRE(s.answer.status == 0);
  caf::anon_send(rig.replica.scheduler, abort_atom_v, request_id{1});
  caf::anon_send(rig.replica.scheduler, fault_atom_v, std::string("recover"));
  // Its blocks went back, and it is gone: the next request runs to its end alone.
  const auto next = rig.submit(test_request(2, {5, 6, 7}, 3));
  CHECK(next.log->wait_finished() == finish_reason::length);
  std::lock_guard lock(s.log->mu);
  CHECK(s.log->tokens == 0);
  CHECK(s.log->finished == finish_reason::none); // (an abort sends nothing more)
}

TEST_CASE("evacuated: every request ends with an error, and submissions are refused until it steps") {
  replica_rig rig;
  caf::anon_send(rig.replica.scheduler, fault_atom_v, std::string("hang"));
  const auto s = rig.submit(test_request(1, {5, 6, 7}, 100));
  INFO(s.answer.message);
  REQUIRE(s.answer.status == 0);
  caf::anon_send(rig.replica.scheduler, evacuate_atom_v);
  CHECK(s.log->wait_finished() == finish_reason::error);
  const auto refused = rig.submit(test_request(2, {5, 6}, 2));
  CHECK(refused.answer.status == -1); // (an error, not a refusal: the sink retries elsewhere)
  CHECK(refused.answer.message.find("out of rotation") != std::string::npos);
}
