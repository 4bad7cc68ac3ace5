#include "actors/scheduler_actor.hpp"

#include "base/check.hpp"
#include "engine/core/replica_core.hpp"
#include "engine/core/step_log.hpp"
#include "policies/registry.hpp"

#include <caf/all.hpp>

#include <cstdio>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace troupe {
namespace {

struct scheduler_state {
  replica_options options;
  /// Its logic (engine/core/replica_core): the batch scheduler over the
  /// lease, refills, backpressure, load reports; `core` and `lease` are its.
  std::unique_ptr<replica_core> replica;
  batch_scheduler* core = nullptr;
  const leased_blocks* lease = nullptr;
  std::shared_ptr<step_log::writer> log; ///< when asked for
  memory_manager_actor memory;
  std::unordered_set<request_id> matching;  ///< submissions whose prefix match is in flight
  std::unordered_set<request_id> cancelled; ///< of those, aborted meanwhile
  steady_time started = std::chrono::steady_clock::now(); ///< the policies' clock starts here
  executor_actor executor;
  server_metrics* metrics = nullptr;
  server_status* status = nullptr;
  struct client {
    sink_actor sink;
    delivery_count undelivered;
  };
  std::unordered_map<request_id, client> sinks;
  bool stepping = false; ///< a step is queued or in flight
  bool hung = false;     ///< fault injection: steps stop as on a stuck device
  bool executor_busy = false; ///< a step is at the executor
  /// Out of rotation and emptied: submissions (routed before, or matching
  /// then) are refused with an error, so that their sinks retry elsewhere,
  /// until a step completes again (or it recovers).
  bool evacuated = false;
  std::uint64_t submitted = 0, submitted_tokens = 0; ///< submissions received, ever (the router's in-flight count)
  std::uint64_t steps = 0; ///< steps finished, ever

  void forget(request_id id) {
    if (sinks.erase(id) > 0) status->num_queued.fetch_sub(1, std::memory_order_relaxed);
  }
  auto seconds_since_start(steady_time t) const -> double {
    return std::chrono::duration<double>(t - started).count();
  }
  auto now_s() const -> double { return seconds_since_start(std::chrono::steady_clock::now()); }

  const server_metrics::replica_series* series = nullptr; ///< this replica's, looked up once (the lookup locks)

  void publish() {
    if (series == nullptr) series = &metrics->replica(options.replica);
    replica_report r;
    r.running = core->num_running();
    r.waiting = core->num_waiting();
    // KV in use: held references but the lease's free blocks, of the replica's share.
    r.kv_use = static_cast<double>(lease->num_in_use()) / static_cast<double>(lease->capacity());
    r.swapped = core->num_swapped();
    r.num_preemptions = core->num_preemptions();
    r.num_swap_outs = core->num_swap_outs();
    r.forked_tokens = core->num_forked_tokens();
    r.jump_forward_tokens = core->num_jump_forward_tokens();
    r.steps = steps;
    series->record(r);
    if (options.router) {
      // Coalesced: counts the router acts on go at once, the rest (token
      // sums, KV use, queue age) at most every report interval.
      r.submitted = submitted;
      const double now = now_s();
      if (!replica->report_due(r, now)) return;
      r.prefill_tokens = core->prefill_tokens();
      r.decode_tokens = core->decode_tokens();
      r.submitted_tokens = submitted_tokens;
      if (r.waiting > 0) r.queue_age_s = std::max(0.0, now - core->oldest_waiting_arrival());
      caf::anon_send(options.router, load_atom_v, static_cast<std::int32_t>(options.replica), r);
    }
  }
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

void kick(self_ptr self);

// After a step or an abort: the publishes and releases for the memory
// manager in one message, and a refill of the lease when it runs low (asked
// for ahead of need, so that no step waits on it).
void report(self_ptr self) {
  auto& st = self->state;
  auto t = st.replica->after_change();
  if (st.log && t.shrunk_to >= 0) st.log->shrink(st.now_s(), t.shrunk_to);
  if (!t.ops.empty()) self->send(st.memory, apply_atom_v, std::move(t.ops));
  if (t.refill) self->send(self, refill_atom_v);
}

// Leases more (replica_core::begin_refill says how many); a short answer
// while starved is asked again shortly.
void refill(self_ptr self) {
  auto& st = self->state;
  const auto want = st.replica->begin_refill();
  if (want <= 0) return;
  self->request(st.memory, caf::infinite, lease_atom_v, want)
      .then(
          [self](std::vector<block_id>& blocks) {
            auto& st = self->state;
            if (st.log) st.log->lease(st.now_s(), blocks);
            if (st.replica->refilled(blocks)) self->delayed_send(self, std::chrono::milliseconds(1), refill_atom_v);
            kick(self);
          },
          [self](caf::error&) { self->state.replica->refill_failed(); });
}

void kick(self_ptr self) {
  auto& st = self->state;
  if (st.stepping || !st.core->has_work()) return;
  st.stepping = true;
  self->send(self, step_atom_v);
}

// Ends every request with finish_reason::error: their sinks retry the ones
// that have streamed nothing on another replica.
void fail_everything(self_ptr self, const std::string& why) {
  auto& st = self->state;
  std::fprintf(stderr, "troupe: replica %d: %s; ending its %zu request(s)\n", st.options.replica, why.c_str(),
               st.sinks.size());
  for (auto& [id, c] : st.sinks) {
    if (st.log) st.log->abort(st.now_s(), id);
    st.core->abort(id);
    c.undelivered->fetch_add(1, std::memory_order_relaxed);
    self->send(c.sink, tokens_atom_v, request_update{id, {}, finish_reason::error, {}});
  }
  while (!st.sinks.empty()) st.forget(st.sinks.begin()->first);
  report(self);
}

// Token messages sent but whose text has not reached its connection yet.
// When the serving path (sinks, HTTP threads) falls behind the engine, the
// next step waits: otherwise tokens pile up in mailboxes and reach clients
// in bursts with long gaps. A real model's step time hides this; the
// zero-cost executor would outrun delivery without it.
auto backlog(const scheduler_state& st) -> std::int64_t {
  std::int64_t n = 0;
  for (const auto& [id, c] : st.sinks) n += c.undelivered->load(std::memory_order_relaxed);
  return n;
}

void step(self_ptr self) {
  auto& st = self->state;
  if (st.hung) return; // stays "stepping": nothing runs until it recovers
  // Up to two steps' tokens may be on their way (replica_core::may_step).
  if (!st.replica->may_step(backlog(st))) {
    self->delayed_send(self, std::chrono::microseconds(100), step_atom_v);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const double now_s = st.seconds_since_start(now);
  auto out = std::make_shared<scheduler_output>(st.core->schedule(now_s));
  if (st.log) st.log->schedule(now_s, now_s, *out);
  for (const auto& n : out->new_requests) // each request once, at its first step
    if (const request* r = st.core->find(n.id)) st.metrics->queue_time.Observe(now_s - r->arrival_s);
  // Work that cannot run means blocks are short: ask for more (the refill
  // kicks the next step).
  st.replica->set_starved(out->scheduled.empty() && st.core->has_work());
  if (out->empty()) {
    st.stepping = false;
    report(self);
    st.publish();
    return;
  }
  st.executor_busy = true;
  self->request(st.executor, caf::infinite, execute_atom_v, step_ptr(out))
      .then(
          [self, out, now_s](step_result& result) {
            auto& st = self->state;
            st.executor_busy = false;
            ++st.steps;
            st.evacuated = false; // it steps: whatever took it out has passed
            const double took = st.now_s() - now_s;
            if (st.log) st.log->step(now_s, took, *out, result);
            auto updates = st.core->update(*out, result);
            st.core->observe_step(took); // (paces prefill against decodes: batch_scheduler)
            // The memory manager gets this step's publishes before any
            // client its tokens: a request sent once a response arrived
            // finds the blocks it left (prefix-affine routing probes them).
            report(self);
            for (auto& u : updates) {
              const auto it = st.sinks.find(u.id);
              if (it == st.sinks.end()) continue;
              const bool last = u.finished != finish_reason::none;
              it->second.undelivered->fetch_add(1, std::memory_order_relaxed);
              self->send(it->second.sink, tokens_atom_v, std::move(u));
              if (last) st.forget(it->first);
            }
            st.status->last_progress_ns.store(
                std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
            st.publish();
            st.stepping = false;
            kick(self);
          },
          [self](caf::error& e) {
            self->state.executor_busy = false;
            fail_everything(self, "the executor failed (" + self->system().render(e) + ")");
            self->state.stepping = false;
          });
}

// The sink's abort: a request ended now (its blocks freed), or refused when
// its prefix match comes back.
void abort_request(self_ptr self, request_id id) {
  auto& st = self->state;
  if (st.matching.contains(id)) {
    st.cancelled.insert(id); // refused when its match comes back
    return;
  }
  // Every sink sends one as it quits: for a request already ended
  // there is nothing to do.
  if (st.log) st.log->abort(st.now_s(), id);
  if (!st.core->abort(id)) return;
  st.forget(id);
  report(self);
  st.publish();
  kick(self); // tells the executor to forget it
}

// Fault injection (the admin API, for tests).
void inject_fault(self_ptr self, const std::string& fault) {
  auto& st = self->state;
  std::fprintf(stderr, "troupe: replica %d: injected fault \"%s\"\n", st.options.replica, fault.c_str());
  if (fault == "hang") {
    st.hung = true;
  } else if (fault == "recover") {
    if (!st.hung) return;
    st.hung = false;
    st.evacuated = false;
    // (A step still at the executor kicks the next when it returns.)
    if (st.executor_busy) return;
    st.stepping = false;
    kick(self);
  } else if (fault == "crash") {
    self->quit(caf::make_error(caf::sec::runtime_error, "crashed (injected fault)"));
  }
}

// A submission, by the sink (a further choice) or placed by the router:
// the prefix match at the memory manager (once, when prefix caching is on),
// then the batch scheduler's admission, told through `reply` (admission,
// failed: out of rotation, the sink to retry elsewhere).
using reply_fn = std::function<void(admission, bool)>;
void accept(self_ptr self, request r, sink_actor sink, steady_time arrival, delivery_count undelivered,
            reply_fn reply) {
  auto& st = self->state;
  r.arrival_s = st.seconds_since_start(arrival);
  auto queue = [self, reply, sink = std::move(sink), undelivered = std::move(undelivered)](
                   request& r) mutable {
    auto& st = self->state;
    // Received, whatever comes of it: no longer in flight for the router.
    ++st.submitted;
    st.submitted_tokens += r.prompt.size();
    const request_id id = r.id;
    const auto matched = r.matched_blocks;
    st.matching.erase(id);
    const bool cancelled = st.cancelled.erase(id) > 0; // its client left during the match
    // Refused: the references the match took go back.
    const auto release_matched = [&] {
      std::vector<block_op> ops;
      for (const block_id b : matched) ops.push_back({block_op::kind::release, b, {}, 0, 0});
      if (!ops.empty()) self->send(st.memory, apply_atom_v, std::move(ops));
    };
    if (st.evacuated && !cancelled) {
      // Out of rotation: the sink retries it elsewhere.
      release_matched();
      reply(admission{}, true);
      st.publish();
      return;
    }
    std::optional<request> logged;
    if (st.log && !cancelled) logged = r;
    auto result = cancelled ? submit_result{499, "cancelled"} : st.core->submit(std::move(r));
    if (logged) st.log->submit(st.now_s(), *logged, result.status);
    if (result.status != 0) {
      release_matched();
      reply(admission{result.status, std::move(result.reason)}, false);
      st.publish(); // (the router learns it arrived)
      return;
    }
    st.sinks.emplace(id, scheduler_state::client{std::move(sink), std::move(undelivered)});
    if (st.status->num_queued.fetch_add(1, std::memory_order_relaxed) == 0)
      st.status->last_progress_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                        std::memory_order_relaxed);
    kick(self);
    st.publish(); // (the queue's gauges count it now, not after the next step: a hung replica's too)
    reply(admission{}, false);
  };
  // (Those take no hits; a fork group's later choices share the first's blocks.)
  if (!st.options.kv.enable_prefix_caching || r.sampling.prompt_logprobs >= 0 || r.choice > 0) {
    queue(r);
    return;
  }
  // The prefix match: one round trip to the memory manager, once per request.
  const auto id = r.id;
  st.matching.insert(id);
  auto tokens = r.prompt;
  self->request(st.memory, caf::infinite, match_atom_v, r.tenant, std::move(tokens), st.options.kv.block_size,
                r.priority)
      .then(
          [queue, r = std::move(r)](std::vector<block_id>& matched) mutable {
            r.matched_blocks = std::move(matched);
            queue(r);
          },
          [self, id, reply](caf::error&) mutable {
            self->state.matching.erase(id); // (and an abort that came meanwhile has nothing left to do)
            self->state.cancelled.erase(id);
            reply(admission{503, "the server is shutting down"}, false);
          });
}

auto scheduler(self_ptr self, replica_options options, std::vector<block_id> lease, executor_actor executor,
               memory_manager_actor memory, server_metrics* metrics, server_status* status)
    -> scheduler_actor::behavior_type {
  auto& st = self->state;
  self->attach_functor([self](const caf::error& reason) {
    if (reason && reason != caf::exit_reason::user_shutdown)
      std::fprintf(stderr, "troupe: replica scheduler stopped: %s\n", self->system().render(reason).c_str());
  });
  st.log = options.step_log;
  if (st.log) st.log->lease(0, lease);
  st.replica = std::make_unique<replica_core>(
      replica_core_options{options.limits, options.kv, options.scheduling, options.share, options.eos_ids}, lease);
  st.core = &st.replica->scheduler();
  st.lease = &st.replica->lease();
  st.memory = std::move(memory);
  st.options = std::move(options);
  st.executor = std::move(executor);
  st.metrics = metrics;
  st.status = status;
  st.publish();
  return {
      [self](submit_atom, request& r, sink_actor& sink, steady_time arrival,
             delivery_count& undelivered) -> caf::typed_response_promise<admission> {
        auto rp = self->make_response_promise<admission>();
        accept(self, std::move(r), std::move(sink), arrival, std::move(undelivered),
               [rp](admission a, bool failed) mutable {
                 if (failed) rp.deliver(caf::make_error(caf::sec::runtime_error, "the replica is out of rotation"));
                 else rp.deliver(std::move(a));
               });
        return rp;
      },
      [self](place_atom, request& r, sink_actor& sink, steady_time arrival, delivery_count& undelivered,
             std::int32_t replica) {
        // The router placed it here: the answer goes to the sink itself,
        // before any of its tokens (they follow it from this actor).
        const auto id = r.id;
        accept(self, std::move(r), sink, arrival, std::move(undelivered),
               [self, sink, id, replica](admission a, bool failed) {
                 self->send(sink, admitted_atom_v, id,
                            placement{std::move(a), replica, caf::actor_cast<caf::actor>(self), failed});
               });
      },
      [self](abort_atom, request_id id) { abort_request(self, id); },
      [self](step_atom) { step(self); },
      [self](refill_atom) { refill(self); },
      [self](evacuate_atom) {
        self->state.evacuated = true;
        fail_everything(self, "out of rotation (failed health checks)");
      },
      [self](fault_atom, const std::string& fault) { inject_fault(self, fault); },
  };
}

} // namespace

auto spawn_scheduler(caf::actor_system& sys, const replica_options& options, std::vector<block_id> lease,
                     executor_actor executor, memory_manager_actor memory, server_metrics* metrics,
                     server_status* status) -> scheduler_actor {
  return sys.spawn(scheduler, options, std::move(lease), std::move(executor), std::move(memory), metrics, status);
}

} // namespace troupe
