// A replica on a worker, through the real actors of the wire (in one actor
// system: CAF's network layer is the integration tests' part): the door
// refuses a wrong proof and an unknown model, admits a right one with a
// ticket, and the endpoint it is then given becomes a proxy in the router's
// rotation. A request the router places there is admitted at the sink
// before any of its tokens, and finishes; the worker's scheduler gone takes
// the proxy with it, out of rotation.

#include "actors/router_actor.hpp"
#include "actors/wire.hpp"
#include "tests/actors/replica_rig.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

using namespace troupe;
using namespace troupe::testing;

namespace {

constexpr const char* k_secret = "a fleet secret of 32 bytes, or so";

struct worker_rig {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  server_metrics metrics{nullptr, "tiny", "", 4, {"cpu:0", "cpu:1"}};
  server_status status;
  router_actor router;
  std::shared_ptr<fleet> models = std::make_shared<fleet>();
  door_actor door;
  replica_handles worker; ///< the worker's own replica, its endpoint in front
  endpoint_actor endpoint;

  worker_rig() {
    add_wire_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    router_options ro;
    ro.check_interval_s = 3600; // (no deep checks but the one a worker's replica passes to join)
    ro.health.healthy_after = 1;
    ro.check_prompt = {1, 2, 3};
    ro.block_size = k_block_size;
    router = spawn_router(*sys, ro);
    auto ctx = std::make_shared<serving_context>();
    ctx->router = router;
    models->models.push_back({"tiny", ctx, nullptr, 0});
    door = spawn_door(*sys, models, k_secret);
    worker = start_test_replica(*sys, metrics, status, 0, router_actor{});
    endpoint = spawn_endpoint(*sys, worker.scheduler);
  }
  ~worker_rig() {
    caf::anon_send_exit(worker.scheduler, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(worker.memory, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(door, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
  }

  /// The door's answer to a join of `model` with a proof under `secret`:
  /// (index, ticket), or the error's text.
  auto join(const std::string& model, const std::string& secret) -> std::variant<std::pair<std::int32_t, std::string>, std::string> {
    caf::scoped_actor self{*sys};
    std::string challenge;
    self->request(door, caf::infinite, hello_atom_v).receive([&](std::string& c) { challenge = std::move(c); },
                                                              [](caf::error& e) { FAIL(to_string(e)); });
    std::variant<std::pair<std::int32_t, std::string>, std::string> out;
    self->request(door, caf::infinite, join_atom_v, model, challenge, worker_proof(secret, challenge))
        .receive([&](std::int32_t index, router_actor&, std::string& ticket) { out = std::pair{index, std::move(ticket)}; },
                 [&](caf::error& e) { out = sys->render(e); });
    return out;
  }

  auto ready_replicas() -> std::int64_t {
    caf::scoped_actor self{*sys};
    std::int64_t ready = 0;
    self->request(router, caf::infinite, fleet_atom_v)
        .receive([&](fleet_snapshot& f) {
                   for (const auto& r : f) ready += r.ready ? 1 : 0;
                 },
                 [](caf::error& e) { FAIL(to_string(e)); });
    return ready;
  }
};

} // namespace

TEST_CASE("the door: a wrong proof and an unknown model are refused; a right one joins, and its proxy serves") {
  worker_rig rig;
  const auto wrong = rig.join("tiny", "not the fleet's secret, but as long");
  REQUIRE(std::holds_alternative<std::string>(wrong));
  CHECK(std::get<std::string>(wrong).find("wrong credentials") != std::string::npos);
  const auto unknown = rig.join("huge", k_secret);
  REQUIRE(std::holds_alternative<std::string>(unknown));
  CHECK(std::get<std::string>(unknown).find("no model 'huge' is served here; served: 'tiny'") != std::string::npos);

  const auto joined = rig.join("tiny", k_secret);
  REQUIRE(std::holds_alternative<std::pair<std::int32_t, std::string>>(joined));
  const auto [index, ticket] = std::get<std::pair<std::int32_t, std::string>>(joined);
  CHECK(index == 0);
  caf::anon_send(rig.door, join_atom_v, index, std::string("tiny"), rig.endpoint, ticket);
  for (int i = 0; i < 500 && rig.ready_replicas() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(rig.ready_replicas() == 1);

  // A request placed on the proxy: the admission at the sink first, then its tokens.
  auto log = std::make_shared<sink_log>();
  auto undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
  auto sink = rig.sys->spawn(collecting_sink, log, undelivered);
  caf::scoped_actor self{*rig.sys};
  placement routed;
  policy::route_request q;
  q.prompt_tokens = 3;
  q.max_tokens = 4;
  self->request(rig.router, caf::infinite, dispatch_atom_v, test_request(7, {5, 6, 7}), q, std::vector<std::int32_t>{},
                false, sink, std::chrono::steady_clock::now(), undelivered)
      .receive([&](placement& p) { routed = std::move(p); }, [](caf::error& e) { FAIL(to_string(e)); });
  CHECK(routed.replica == 0);
  const auto admitted = log->wait_admitted(std::chrono::seconds(30));
  REQUIRE(admitted);
  CHECK(admitted->answer.status == 0);
  CHECK_FALSE(admitted->failed);
  CHECK(admitted->scheduler == routed.scheduler);
  CHECK(log->wait_finished() == finish_reason::length);
  CHECK(log->tokens == 4);
  CHECK(log->tokens_before_admission == 0);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);

  // The worker's scheduler gone: its endpoint, then the proxy, follow; the router takes it out.
  caf::anon_send_exit(rig.worker.scheduler, caf::exit_reason::kill);
  for (int i = 0; i < 500 && rig.ready_replicas() == 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(rig.ready_replicas() == 0);
}

TEST_CASE("a ticket serves only its own replica; a forged one, none") {
  worker_rig rig;
  const auto joined = rig.join("tiny", k_secret);
  REQUIRE(std::holds_alternative<std::pair<std::int32_t, std::string>>(joined));
  const auto [index, ticket] = std::get<std::pair<std::int32_t, std::string>>(joined);
  caf::anon_send(rig.door, join_atom_v, index + 1, std::string("tiny"), rig.endpoint, ticket); // (not its replica)
  caf::anon_send(rig.door, join_atom_v, index, std::string("tiny"), rig.endpoint, std::string("forged"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(rig.ready_replicas() == 0);
}
