#pragma once
// The serving actors of one model for the actor tests: a tokenizer of the
// pool (the test tokenizer, ChatML), the router and, when asked, a replica
// over a zero executor (tests/actors/replica_rig.hpp), in a serving context
// as the server builds it.

#include "actors/router_actor.hpp"
#include "actors/serving_context.hpp"
#include "actors/tokenizer_actor.hpp"
#include "actors/wire.hpp"
#include "tests/actors/replica_rig.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <caf/all.hpp>

#include <memory>
#include <vector>

namespace troupe::testing {

struct serving_fleet {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  server_metrics metrics{nullptr, "tiny", "", 1, {"cpu:0"}};
  server_status status;
  std::shared_ptr<serving_context> ctx = std::make_shared<serving_context>();
  std::vector<caf::actor> actors;
  scheduler_actor replica;

  explicit serving_fleet(bool with_replica) {
    add_wire_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    profile_settings s;
    s.name = "tiny";
    s.version = "tiny@1";
    s.max_model_len = 512;
    s.eos_ids = {2};
    static_cast<model_profile&>(*ctx) =
        make_profile(std::shared_ptr<const tokenizer>(&test_tokenizer(), [](const tokenizer*) {}), s);
    ctx->metrics = &metrics;
    auto chatml = std::make_shared<const chat_template>(
        make_chat_template(builtin_chat_template(chat_format::chatml), "chatml"));
    ctx->tokenizers.push_back(spawn_tokenizer(*sys, ctx->tok, chatml, nullptr));
    router_options ro;
    ro.check_interval_s = 3600;
    ro.check_prompt = {1, 2, 3};
    ro.num_ready = ctx->num_ready; // (what readiness reads)
    ctx->router = spawn_router(*sys, ro);
    actors = {caf::actor_cast<caf::actor>(ctx->tokenizers.front()), caf::actor_cast<caf::actor>(ctx->router)};
    if (with_replica) {
      auto [scheduler, mm] = start_test_replica(*sys, metrics, status, 0, ctx->router);
      replica = scheduler;
      actors.push_back(caf::actor_cast<caf::actor>(scheduler));
      actors.push_back(caf::actor_cast<caf::actor>(mm));
      caf::anon_send(ctx->router, join_atom_v, std::int32_t{0}, scheduler, false, false);
      caf::scoped_actor self{*sys};
      self->request(ctx->router, caf::infinite, fleet_atom_v).receive([](fleet_snapshot&) {}, [](caf::error&) {});
    }
  }
  ~serving_fleet() {
    for (auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
  }
};

} // namespace troupe::testing
