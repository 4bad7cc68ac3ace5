#include "actors/router_actor.hpp"

#include "base/check.hpp"
#include "policies/registry.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

namespace troupe {
namespace {

/// Health checks' request ids: far above the gateway's.
constexpr request_id check_id_base = request_id{1} << 62;

struct replica_slot {
  scheduler_actor scheduler; ///< invalid until it joins
  bool remote = false;       ///< runs on a worker: its series are recorded here, from its load reports
  std::uint64_t check = 0;   ///< the number of its check in flight, 0: none
  request_id check_id = 0;
  /// Its steps finished as last reported when the check began: a replica
  /// whose steps go on is busy, not dead.
  std::uint64_t check_steps = 0;
};

struct router_state {
  router_options options;
  std::unique_ptr<router_core> core;
  std::vector<replica_slot> slots;
  /// The devices whose prefix caches a dispatch probes (device_atom), and
  /// each replica's among them (-1: none).
  std::vector<memory_manager_actor> devices;
  std::vector<std::int32_t> replica_device;
  std::uint64_t next_check = 1;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  /// Replica i's configured capacity (1 when none is).
  auto weight_of(std::size_t i) const -> double { return i < options.weights.size() ? options.weights[i] : 1.0; }
  auto slot(std::size_t i) -> replica_slot& {
    if (i >= slots.size()) slots.resize(i + 1);
    return slots[i];
  }
  // The gauges and the count /health/ready reads, after any change.
  void publish_ready() {
    std::int32_t n = 0;
    for (std::size_t i = 0; i < core->num_replicas(); ++i) {
      const bool ready = core->view(i).ready;
      n += ready ? 1 : 0;
      if (options.metrics) options.metrics->replica(static_cast<int>(i)).ready->Set(ready ? 1.0 : 0.0);
    }
    if (options.num_ready) options.num_ready->store(n, std::memory_order_relaxed);
  }
};

using self_ptr = router_actor::stateful_pointer<router_state>;

// A remote replica's series, which its scheduler (in the worker's process)
// cannot record into this node's registry.
void record_load(const server_metrics& metrics, std::size_t i, const replica_report& r) {
  metrics.replica(static_cast<int>(i)).record(r);
}

auto seconds(double s) -> std::chrono::microseconds {
  return std::chrono::microseconds(static_cast<std::int64_t>(s * 1e6));
}

// A deep check's sink: passes when its one token arrives.
auto check_sink(sink_actor::pointer self, router_actor router, std::int32_t replica, std::uint64_t check)
    -> sink_actor::behavior_type {
  auto got_token = std::make_shared<bool>(false);
  return {
      [=](tokens_atom, const request_update& u) {
        if (u.token) *got_token = true;
        if (u.finished == finish_reason::none) return;
        const bool passed = *got_token && u.finished != finish_reason::error && u.finished != finish_reason::abort;
        self->send(router, checked_atom_v, replica, check, passed);
        self->quit();
      },
      [self](gone_atom) { self->quit(); },
      [](admitted_atom, request_id, const placement&) {}, // (a check is submitted, and answered as such)
  };
}

void record(self_ptr self, std::size_t i, bool passed) {
  auto& st = self->state;
  if (!passed && st.options.metrics)
    st.options.metrics->replica(static_cast<int>(i)).health_checks_failed->Increment();
  const auto change = st.core->record_check(i, passed);
  if (change == health_change::out) {
    std::fprintf(stderr, "troupe: replica %zu: out of rotation after %d failed health checks\n", i,
                 st.core->health(i).failures);
    // Its requests move elsewhere (those that have streamed nothing).
    caf::anon_send(st.slot(i).scheduler, evacuate_atom_v);
  } else if (change == health_change::back) {
    std::fprintf(stderr, "troupe: replica %zu: back in rotation after %d passed health checks\n", i,
                 st.core->health(i).successes);
  }
  if (change != health_change::none) st.publish_ready();
}

void start_check(self_ptr self, std::size_t i) {
  auto& st = self->state;
  auto& slot = st.slot(i);
  if (!slot.scheduler || slot.check != 0 || !st.core->health(i).alive) return;
  slot.check = st.next_check++;
  slot.check_id = check_id_base + slot.check;
  slot.check_steps = st.core->report_of(i).steps;
  request r;
  r.id = slot.check_id;
  r.prompt = st.options.check_prompt;
  r.sampling.max_tokens = 1;
  r.sampling.temperature = 0;
  r.priority = std::numeric_limits<std::int32_t>::max();
  r.tenant = 0x6865616c7468ull; // its own prefix-cache namespace
  st.core->count_submission(i, static_cast<std::int64_t>(r.prompt.size()));
  const auto replica = static_cast<std::int32_t>(i);
  const auto check = slot.check;
  auto sink = self->spawn(check_sink, caf::actor_cast<router_actor>(self), replica, check);
  auto undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
  self->request(slot.scheduler, caf::infinite, submit_atom_v, std::move(r), sink, std::chrono::steady_clock::now(),
                undelivered)
      .then(
          [self, replica, check, sink](const admission& a) {
            // A full queue says nothing of health: no verdict.
            if (a.status == 429) {
              auto& sl = self->state.slot(static_cast<std::size_t>(replica));
              if (sl.check == check) sl.check = 0;
              caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
            } else if (a.status != 0) {
              caf::anon_send(caf::actor_cast<router_actor>(self), checked_atom_v, replica, check, false);
              caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
            }
          },
          [sink](caf::error&) { caf::anon_send_exit(sink, caf::exit_reason::user_shutdown); });
  // Unanswered by the timeout: failed, unless the replica finished steps
  // meanwhile (the check can wait behind work: one sequence at a time held
  // by a stream, a long prompt's prefill chunks); dropped either way. (A
  // single step longer than the timeout still fails it.)
  self->delayed_send(self, seconds(st.options.check_timeout_s), timeout_atom_v, replica, check);
}

/// A dispatch on its way: the submission, its route and where it answers.
struct dispatch_order {
  request r;
  policy::route_request route;
  std::vector<std::int32_t> avoid;
  sink_actor sink;
  steady_time arrival;
  delivery_count undelivered;
  caf::typed_response_promise<placement> rp;
};

// The replica for a dispatch (`cached`: per replica, the prompt's blocks its
// device holds): the submission placed at its scheduler, which answers the
// sink itself, then the router's answer, where it went (the sink then
// watches it, and aborts there: after the submission, which is queued first).
void place(self_ptr self, dispatch_order& d, const std::vector<std::int32_t>& cached) {
  auto& st = self->state;
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
  const auto i = st.core->route(d.route, now, cached, d.avoid);
  if (i == policy::no_replica || !st.slot(i).scheduler) {
    d.rp.deliver(placement{admission{0, {}, true}, -1, {}, false});
    return;
  }
  const auto& scheduler = st.slot(i).scheduler;
  const auto replica = static_cast<std::int32_t>(i);
  self->send(scheduler, place_atom_v, std::move(d.r), std::move(d.sink), d.arrival, std::move(d.undelivered), replica);
  d.rp.deliver(placement{admission{}, replica, caf::actor_cast<caf::actor>(scheduler), false});
}

// Each device's prefix cache says how much of the prompt it holds, then the
// dispatch is placed.
void probe_then_place(self_ptr self, std::shared_ptr<dispatch_order> d) {
  auto& st = self->state;
  struct probes {
    std::vector<std::int32_t> per_device;
    std::size_t left;
  };
  const auto n = st.devices.size();
  auto gathered = std::make_shared<probes>(probes{std::vector<std::int32_t>(n, 0), n});
  for (std::size_t k = 0; k < n; ++k) {
    const auto done = [self, gathered, d, k](std::int32_t blocks) {
      gathered->per_device[k] = blocks;
      if (--gathered->left > 0) return;
      const auto& devs = self->state.replica_device;
      std::vector<std::int32_t> cached(devs.size(), 0);
      for (std::size_t i = 0; i < cached.size(); ++i)
        if (devs[i] >= 0) cached[i] = gathered->per_device[static_cast<std::size_t>(devs[i])];
      place(self, *d, cached);
    };
    self->request(st.devices[k], caf::infinite, probe_atom_v, d->r.tenant, d->r.prompt, st.options.block_size)
        .then(done, [d](caf::error& e) mutable { d->rp.deliver(std::move(e)); });
  }
}

auto status_json(const router_state& st) -> std::string {
  std::ostringstream o;
  o << '[';
  for (std::size_t i = 0; i < st.core->num_replicas(); ++i) {
    const auto& h = st.core->health(i);
    const auto& v = st.core->view(i);
    o << (i ? "," : "") << R"({"replica":)" << i << R"(,"ready":)" << (v.ready ? "true" : "false")
      << R"(,"joined":)" << (h.joined ? "true" : "false") << R"(,"alive":)" << (h.alive ? "true" : "false")
      << R"(,"draining":)" << (h.draining ? "true" : "false") << R"(,"healthy":)" << (h.healthy ? "true" : "false")
      << R"(,"checks":)" << h.checks << R"(,"failed_checks":)" << h.failed_checks << R"(,"running":)" << v.running
      << R"(,"waiting":)" << v.waiting << R"(,"in_flight":)" << v.in_flight << R"(,"kv_use":)" << v.kv_use << '}';
  }
  o << ']';
  return o.str();
}

// Its scheduler stopped: out of rotation for good (until a new join).
void replica_down(self_ptr self, const caf::down_msg& m) {
  auto& st = self->state;
  for (std::size_t i = 0; i < st.slots.size(); ++i) {
    if (!st.slots[i].scheduler || st.slots[i].scheduler.address() != m.source) continue;
    std::fprintf(stderr, "troupe: replica %zu: its scheduler stopped (%s); out of rotation\n", i,
                 self->system().render(m.reason).c_str());
    st.core->set_dead(i);
    st.slots[i].scheduler = nullptr;
    if (st.options.metrics && st.slots[i].remote) record_load(*st.options.metrics, i, {}); // (it holds nothing now)
    st.slots[i].check = 0;
    st.publish_ready();
  }
}

auto dispatched(self_ptr self, request& r, policy::route_request& q, std::vector<std::int32_t>& avoid, bool probe,
                sink_actor& sink, steady_time arrival, delivery_count& undelivered)
    -> caf::typed_response_promise<placement> {
  auto& st = self->state;
  auto rp = self->make_response_promise<placement>();
  auto d = std::make_shared<dispatch_order>(dispatch_order{std::move(r), std::move(q), std::move(avoid), std::move(sink),
                                                           arrival, std::move(undelivered), rp});
  if (probe && !st.devices.empty())
    probe_then_place(self, std::move(d));
  else
    place(self, *d, {});
  return rp;
}

// Replica `replica`'s device's memory manager, whose prefix cache dispatches probe.
void add_device(router_state& st, std::int32_t replica, const memory_manager_actor& memory) {
  if (replica < 0 || !memory) return;
  std::size_t k = 0;
  while (k < st.devices.size() && st.devices[k] != memory) ++k;
  if (k == st.devices.size()) st.devices.push_back(memory);
  if (st.replica_device.size() <= static_cast<std::size_t>(replica))
    st.replica_device.resize(static_cast<std::size_t>(replica) + 1, -1);
  st.replica_device[static_cast<std::size_t>(replica)] = static_cast<std::int32_t>(k);
}

void joined(self_ptr self, std::int32_t replica, const scheduler_actor& scheduler, bool drained, bool remote) {
  auto& st = self->state;
  if (replica < 0 || !scheduler) return;
  const auto i = static_cast<std::size_t>(replica);
  while (st.core->num_replicas() <= i) st.core->add_replica(st.weight_of(st.core->num_replicas()));
  st.slot(i).scheduler = scheduler;
  st.slot(i).check = 0;
  st.slot(i).remote = remote;
  self->monitor(scheduler);
  // A worker's replica (new, or back after its link dropped) serves once it
  // passes its health checks; the first starts now.
  st.core->join(i, drained, remote);
  st.publish_ready();
  if (remote) start_check(self, i);
}

auto fleet_of(const router_core& core) -> fleet_snapshot {
  fleet_snapshot out(core.num_replicas());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto& h = core.health(i);
    const auto& v = core.view(i);
    out[i] = {v.ready, h.alive && h.joined, h.draining, h.healthy, v.running, v.waiting, v.in_flight, v.kv_use,
              core.report_of(i).queue_age_s};
  }
  return out;
}

// A deep check's outcome, or its timeout: `passed` unless decided already.
void checked(self_ptr self, std::int32_t replica, std::uint64_t check, std::optional<bool> passed) {
  auto& st = self->state;
  if (replica < 0 || static_cast<std::size_t>(replica) >= st.slots.size()) return;
  const auto i = static_cast<std::size_t>(replica);
  auto& slot = st.slots[i];
  if (slot.check != check) return; // already decided (answered, or timed out)
  slot.check = 0;
  if (passed == true) return record(self, i, true);
  if (slot.scheduler) caf::anon_send(slot.scheduler, abort_atom_v, slot.check_id);
  // Timed out: its steps went on, so it is alive, and busy.
  record(self, i, passed.has_value() ? false : st.core->report_of(i).steps != slot.check_steps);
}

auto router(self_ptr self, router_options options) -> router_actor::behavior_type {
  auto& st = self->state;
  // Replicas exist once they join (router_core::join grows to fit).
  st.core = std::make_unique<router_core>(policy::make_routing_policy(options.policy), 0, std::vector<double>{},
                                          options.health);
  st.options = std::move(options);
  for (std::size_t i = 0; i < st.options.slots; ++i) st.core->add_replica(st.weight_of(i));
  st.publish_ready();
  self->set_down_handler([self](caf::down_msg& m) { replica_down(self, m); });
  self->delayed_send(self, seconds(st.options.check_interval_s), tick_atom_v);
  return {
      [self](dispatch_atom, request& r, policy::route_request& q, std::vector<std::int32_t>& avoid, bool probe,
             sink_actor& sink, steady_time arrival, delivery_count& undelivered) {
        return dispatched(self, r, q, avoid, probe, sink, arrival, undelivered);
      },
      [self](device_atom, std::int32_t replica, const memory_manager_actor& memory) {
        add_device(self->state, replica, memory);
      },
      [self](load_atom, std::int32_t replica, const replica_report& r) {
        auto& st = self->state;
        if (replica < 0 || static_cast<std::size_t>(replica) >= st.core->num_replicas()) return;
        const auto i = static_cast<std::size_t>(replica);
        st.core->report(i, r);
        if (st.options.metrics && st.slot(i).remote) record_load(*st.options.metrics, i, r);
      },
      [self](join_atom, std::int32_t replica, const scheduler_actor& scheduler, bool drained, bool remote) {
        joined(self, replica, scheduler, drained, remote);
      },
      [self](join_atom) {
        auto& st = self->state;
        return static_cast<std::int32_t>(st.core->add_replica(st.weight_of(st.core->num_replicas())));
      },
      [self](drain_atom, std::int32_t replica, bool draining) {
        auto& st = self->state;
        if (replica < 0 || static_cast<std::size_t>(replica) >= st.core->num_replicas()) return;
        st.core->set_draining(static_cast<std::size_t>(replica), draining);
        st.publish_ready();
      },
      [self](status_atom) { return status_json(self->state); },
      [self](fleet_atom) { return fleet_of(*self->state.core); },
      [self](fault_atom, std::int32_t replica, const std::string& fault) {
        auto& st = self->state;
        if (replica >= 0 && static_cast<std::size_t>(replica) < st.slots.size() && st.slots[replica].scheduler)
          caf::anon_send(st.slots[static_cast<std::size_t>(replica)].scheduler, fault_atom_v, fault);
      },
      [self](tick_atom) {
        auto& st = self->state;
        for (std::size_t i = 0; i < st.slots.size(); ++i) start_check(self, i);
        self->delayed_send(self, seconds(st.options.check_interval_s), tick_atom_v);
      },
      [self](checked_atom, std::int32_t replica, std::uint64_t check, bool passed) {
        checked(self, replica, check, passed);
      },
      [self](timeout_atom, std::int32_t replica, std::uint64_t check) { checked(self, replica, check, std::nullopt); },
  };
}

} // namespace

auto spawn_router(caf::actor_system& sys, router_options options) -> router_actor {
  TROUPE_CHECK(!options.check_prompt.empty(), "the router's health check needs a prompt");
  return sys.spawn(router, std::move(options));
}

} // namespace troupe
