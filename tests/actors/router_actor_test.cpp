// The router actor with real replicas: each a scheduler actor over a zero
// executor (tokens without a model) and a memory manager. A dispatch is
// placed on a replica and submitted there (its tokens reach the sink); a
// replica to avoid is avoided; with prefix-affine routing the router probes
// the devices it was told of and sends a repeated prompt where its prefix is
// cached; a drained fleet has no replica; a replica gone answers failed, or
// is out of rotation.

#include "actors/router_actor.hpp"
#include "actors/wire.hpp"
#include "tests/actors/replica_rig.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <thread>

using namespace troupe;

namespace {

using namespace troupe::testing;

struct fleet_rig {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  server_metrics metrics{nullptr, "tiny", "", 4, {"cpu:0", "cpu:1"}};
  server_status status;
  router_actor router;
  std::vector<scheduler_actor> schedulers;
  std::vector<memory_manager_actor> memories;

  /// `replicas` replicas, each on a device of its own; `policy` routes.
  fleet_rig(int replicas, const std::string& policy) {
    add_wire_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    router_options ro;
    ro.policy = policy;
    ro.check_interval_s = 3600; // (no deep checks during the test)
    ro.check_prompt = {1, 2, 3};
    ro.block_size = k_block_size;
    router = spawn_router(*sys, ro);
    for (int r = 0; r < replicas; ++r) {
      auto [scheduler, mm] = start_test_replica(*sys, metrics, status, r, router);
      schedulers.push_back(scheduler);
      memories.push_back(mm);
      caf::anon_send(router, join_atom_v, static_cast<std::int32_t>(r), scheduler, false, false);
      caf::anon_send(router, device_atom_v, static_cast<std::int32_t>(r), mm);
    }
    caf::scoped_actor self{*sys}; // (the joins are in: its answer comes after them)
    self->request(router, caf::infinite, fleet_atom_v).receive([](fleet_snapshot&) {}, [](caf::error&) {});
  }
  ~fleet_rig() {
    for (auto& s : schedulers) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    for (auto& m : memories) caf::anon_send_exit(m, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
  }

  /// One dispatch of a request of `prompt` (max_tokens 4): where the router
  /// placed it, with the admission its replica sent the sink (failed: the
  /// replica was gone before it answered), and (when admitted) how it
  /// finished at the sink.
  auto dispatch(request_id id, std::vector<token_id> prompt, std::vector<std::int32_t> avoid = {}, bool probe = true)
      -> std::pair<placement, finish_reason> {
    auto log = std::make_shared<sink_log>();
    auto undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
    auto sink = sys->spawn(collecting_sink, log, undelivered);
    auto r = test_request(id, std::move(prompt));
    policy::route_request q;
    q.prompt_tokens = static_cast<std::int64_t>(r.prompt.size());
    q.prompt_blocks = static_cast<std::int32_t>((r.prompt.size() - 1) / k_block_size);
    q.max_tokens = 4;
    placement p;
    caf::scoped_actor self{*sys};
    self->request(router, caf::infinite, dispatch_atom_v, std::move(r), q, std::move(avoid), probe, sink,
                  std::chrono::steady_clock::now(), undelivered)
        .receive([&](placement& got) { p = std::move(got); }, [](caf::error& e) { FAIL("dispatch: " << to_string(e)); });
    if (p.scheduler) admission_of(self, p, *log);
    const auto finished = p.answer.status == 0 && !p.answer.no_replica && !p.failed ? log->wait_finished()
                                                                                      : finish_reason::none;
    CHECK(log->tokens_before_admission == 0);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    return {std::move(p), finished};
  }

  /// The replica's answer at the sink, as the sink actor waits for it: its
  /// admission, or its scheduler's death (watched).
  static void admission_of(caf::scoped_actor& self, placement& p, sink_log& log) {
    self->monitor(p.scheduler);
    bool down = false;
    for (int i = 0; i < 3000 && !down; ++i) {
      if (const auto a = log.wait_admitted(std::chrono::milliseconds(10))) {
        CHECK(a->replica == p.replica);
        CHECK(a->scheduler == p.scheduler);
        p.answer = a->answer;
        p.failed = a->failed;
        return;
      }
      self->receive([&](caf::down_msg&) { down = true; }, caf::after(std::chrono::milliseconds(0)) >> [] {});
    }
    REQUIRE(down);
    p.failed = true;
  }
};

auto long_prompt(token_id first) -> std::vector<token_id> {
  std::vector<token_id> p(80);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<token_id>(first + static_cast<token_id>(i % 50));
  return p;
}

} // namespace

TEST_CASE("a dispatch is placed on a replica, submitted there, and its tokens reach the sink") {
  fleet_rig rig(2, "round_robin");
  const auto [p, finished] = rig.dispatch(10, {5, 6, 7});
  CHECK(p.answer.status == 0);
  CHECK_FALSE(p.answer.no_replica);
  CHECK_FALSE(p.failed);
  CHECK((p.replica == 0 || p.replica == 1));
  CHECK(caf::actor_cast<scheduler_actor>(p.scheduler) == rig.schedulers[static_cast<std::size_t>(p.replica)]);
  CHECK(finished == finish_reason::length);
}

TEST_CASE("the replicas to avoid are avoided; all avoided: no replica") {
  fleet_rig rig(2, "round_robin");
  for (int i = 0; i < 4; ++i) CHECK(rig.dispatch(20 + i, {5, 6, 7}, {0}).first.replica == 1);
  const auto [p, finished] = rig.dispatch(30, {5, 6, 7}, {0, 1});
  CHECK(p.answer.no_replica);
  CHECK(p.replica == -1);
  CHECK(finished == finish_reason::none);
}

TEST_CASE("prefix-affine routing probes the devices: a repeated prompt goes where its prefix is cached") {
  fleet_rig rig(2, "prefix_affinity");
  const auto first = rig.dispatch(40, long_prompt(100)).first;
  REQUIRE(first.answer.status == 0);
  for (int i = 0; i < 3; ++i) CHECK(rig.dispatch(41 + i, long_prompt(100)).first.replica == first.replica);
}

TEST_CASE("a drained fleet has no replica; a replica gone is out of rotation") {
  fleet_rig rig(2, "round_robin");
  caf::anon_send(rig.router, drain_atom_v, std::int32_t{0}, true);
  CHECK(rig.dispatch(50, {5, 6}).first.replica == 1);
  caf::anon_send_exit(rig.schedulers[1], caf::exit_reason::kill);
  // (The router learns of the death by its monitor; until then a dispatch there fails.)
  for (int i = 0; i < 200; ++i) {
    const auto p = rig.dispatch(60 + i, {5, 6}).first;
    if (p.answer.no_replica) {
      CHECK(p.replica == -1);
      return;
    }
    CHECK(p.failed);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("the dead replica stayed in rotation");
}
