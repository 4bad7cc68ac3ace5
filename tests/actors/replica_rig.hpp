#pragma once
// Real replicas for the actor tests: a scheduler actor over a zero executor
// (tokens without a model) and a memory manager of its own, and a sink that
// records what reaches it.

#include "actors/executor_actor.hpp"
#include "actors/memory_manager_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "engine/zero_executor.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

namespace troupe::testing {

constexpr std::int32_t k_blocks = 256;
constexpr std::int32_t k_block_size = 16;

/// What a sink got: a placed request's admission from its replica, its
/// tokens and how the request finished.
struct sink_log {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<placement> admitted;
  int tokens = 0;
  int tokens_before_admission = 0;
  finish_reason finished = finish_reason::none;

  auto wait_admitted(std::chrono::milliseconds limit) -> std::optional<placement> {
    std::unique_lock lock(mu);
    cv.wait_for(lock, limit, [&] { return admitted.has_value(); });
    return admitted;
  }

  auto wait_finished() -> finish_reason {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return finished != finish_reason::none; });
    return finished;
  }
};

/// A sink that counts its tokens, and each message as delivered at once.
inline auto collecting_sink(sink_actor::pointer, std::shared_ptr<sink_log> log, delivery_count undelivered)
    -> sink_actor::behavior_type {
  return {
      [log, undelivered](tokens_atom, const request_update& u) {
        undelivered->fetch_sub(1, std::memory_order_relaxed);
        std::lock_guard lock(log->mu);
        if (u.token) ++log->tokens;
        if (!log->admitted) ++log->tokens_before_admission;
        if (u.finished != finish_reason::none) {
          log->finished = u.finished;
          log->cv.notify_all();
        }
      },
      [](gone_atom) {},
      [log](admitted_atom, request_id, const placement& p) {
        std::lock_guard lock(log->mu);
        log->admitted = p;
        log->cv.notify_all();
      },
  };
}

struct replica_handles {
  scheduler_actor scheduler;
  memory_manager_actor memory;
};

/// Replica `index` on a device of its own, reporting to `router` (may be invalid).
inline auto start_test_replica(caf::actor_system& sys, server_metrics& metrics, server_status& status, int index,
                               router_actor router, scheduler_limits limits = {}) -> replica_handles {
  zero_executor_options zo;
  zo.block_size = k_block_size;
  zo.num_kv_blocks = k_blocks;
  zo.vocab_size = 1000;
  zo.avoid = {2};
  auto exec = spawn_executor(sys, std::make_shared<zero_executor>(zo));
  auto mm = spawn_memory_manager(sys, k_blocks, "lru", &metrics, index == 0 ? "cpu:0" : "cpu:1");
  replica_options o;
  o.replica = index;
  o.limits = limits;
  o.kv.block_size = k_block_size;
  o.share = k_blocks;
  o.eos_ids = {2};
  o.router = std::move(router);
  std::vector<block_id> lease;
  caf::scoped_actor self{sys};
  self->request(mm, caf::infinite, lease_atom_v, k_blocks / 2)
      .receive([&](std::vector<block_id>& b) { lease = std::move(b); }, [](caf::error&) {});
  return {spawn_scheduler(sys, o, std::move(lease), exec, mm, &metrics, &status), mm};
}

/// A request of `prompt`, greedy, max_tokens tokens, in tenant 7's namespace.
inline auto test_request(request_id id, std::vector<token_id> prompt, std::int32_t max_tokens = 4) -> request {
  request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.tenant = 7;
  return r;
}

} // namespace troupe::testing
