#include "actors/autoscaler_actor.hpp"

#include "engine/core/fleet_lifecycle.hpp"
#include "policies/registry.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

namespace troupe {
namespace {

/// A histogram's cumulative bucket counts at one moment: the window between
/// two of them gives a quantile, as PromQL's histogram_quantile over rate().
struct histogram_mark {
  std::vector<double> bounds;
  std::vector<std::uint64_t> cumulative;
};

// The buckets of one histogram summed over every tenant's series.
auto mark(const server_metrics& metrics, prometheus::Histogram* server_metrics::request_series::*which)
    -> histogram_mark {
  histogram_mark m;
  for (const auto* series : metrics.tenants()) {
    const auto buckets = (series->*which)->Collect().histogram.bucket;
    if (m.bounds.empty()) {
      for (const auto& b : buckets) m.bounds.push_back(b.upper_bound);
      m.cumulative.assign(buckets.size(), 0);
    }
    for (std::size_t i = 0; i < buckets.size() && i < m.cumulative.size(); ++i)
      m.cumulative[i] += buckets[i].cumulative_count;
  }
  return m;
}

// Prompt and generated tokens so far, every tenant.
auto tokens_so_far(const server_metrics& metrics) -> double {
  double n = 0;
  for (const auto* series : metrics.tenants()) n += series->prompt_tokens->Value() + series->generation_tokens->Value();
  return n;
}

// The q-quantile of what was observed between `before` and `after` (linear
// within a bucket; 0 when nothing was).
auto window_quantile(const histogram_mark& before, const histogram_mark& after, double q) -> double {
  const auto n = after.cumulative.size();
  if (n == 0 || before.cumulative.size() != n) return 0;
  const auto total = after.cumulative.back() - before.cumulative.back();
  if (total == 0) return 0;
  const double rank = q * static_cast<double>(total);
  std::uint64_t below = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto upto = after.cumulative[i] - before.cumulative[i];
    if (static_cast<double>(upto) >= rank) {
      const double lo = i == 0 ? 0.0 : after.bounds[i - 1];
      const double hi = std::isfinite(after.bounds[i]) ? after.bounds[i] : lo;
      const auto in = upto - below;
      return in == 0 ? hi : lo + (hi - lo) * (rank - static_cast<double>(below)) / static_cast<double>(in);
    }
    below = upto;
  }
  return after.bounds.size() > 1 ? after.bounds[n - 2] : 0;
}

/// A replica slot's actors: what to stop when it is retired (none for the
/// initial replicas), and whether the router has shown it alive (so that a
/// later "not alive" means it died).
struct replica_record {
  std::vector<caf::actor> actors;
  bool seen_alive = false;
};

struct autoscaler_state {
  autoscaler_options options;
  std::unique_ptr<fleet_lifecycle> fleet; ///< the states and the rules (engine/core/fleet_lifecycle)
  std::vector<replica_record> replicas;   ///< by slot
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::int32_t last_desired = 0; ///< the last decision's count
  std::string last_reason;      ///< and its reason
  histogram_mark ttft, tpot;
  double tokens = 0;     ///< prompt + generated tokens counted at the last tick
  double last_tick = 0;

  auto now_s() const -> double {
    if (options.clock) return options.clock();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  void publish() {
    if (!options.metrics) return;
    for (const auto s : {replica_state::starting, replica_state::serving, replica_state::warm, replica_state::draining})
      options.metrics->autoscaler_replicas(std::string(replica_state_name(s))).Set(fleet->count(s));
  }
};

using self_ptr = autoscaler_actor::stateful_pointer<autoscaler_state>;

auto seconds(double s) -> std::chrono::microseconds {
  return std::chrono::microseconds(static_cast<std::int64_t>(s * 1e6));
}

void stop_actors(replica_record& r) {
  for (auto& a : r.actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  r.actors.clear();
  r.seen_alive = false;
}

// A cold start on a thread of its own; its replica comes back as a message.
void cold_start(self_ptr self, std::int32_t index, bool to_pool) {
  std::fprintf(stderr, "troupe: autoscaler: starting replica %d%s\n", index, to_pool ? " (for the warm pool)" : "");
  auto back = caf::actor_cast<autoscaler_actor>(self);
  self->spawn<caf::detached>([factory = self->state.options.start, index, back](caf::event_based_actor* worker) {
    started_replica r;
    try {
      r = factory(index);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    r.index = index;
    // Handed over, or stopped here: a start that failed, or that finished
    // after the autoscaler quit, leaves nothing running.
    auto actors = r.actors;
    const auto stop = [actors] {
      for (const auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    };
    worker->request(back, caf::infinite, started_atom_v, std::move(r))
        .then([worker, stop](bool taken) {
                if (!taken) stop();
                worker->quit();
              },
              [worker, stop](caf::error&) {
                stop();
                worker->quit();
              });
  });
}

// Carries out the lifecycle's actions: the router's rotation, cold starts,
// stopped replicas.
void act(self_ptr self, const std::vector<fleet_action>& actions) {
  auto& st = self->state;
  for (const auto& a : actions) {
    const auto i = static_cast<std::int32_t>(a.replica);
    switch (a.what) {
      case fleet_action::kind::start: cold_start(self, i, a.to_pool); break;
      case fleet_action::kind::serve:
        std::fprintf(stderr, "troupe: autoscaler: replica %d back into rotation\n", i);
        self->send(st.options.router, drain_atom_v, i, false);
        break;
      case fleet_action::kind::drain:
        std::fprintf(stderr, "troupe: autoscaler: draining replica %d\n", i);
        self->send(st.options.router, drain_atom_v, i, true);
        break;
      case fleet_action::kind::park: // (still drained at the router: out of rotation, loaded)
        std::fprintf(stderr, "troupe: autoscaler: replica %d drained; parked in the warm pool\n", i);
        break;
      case fleet_action::kind::stop:
        std::fprintf(stderr, "troupe: autoscaler: replica %d drained; stopped\n", i);
        stop_actors(st.replicas[a.replica]);
        break;
    }
  }
}

void decide(self_ptr self, const fleet_snapshot& fleet) {
  auto& st = self->state;
  const double now = st.now_s();
  auto& o = st.options;
  // A replica that died (its scheduler crashed) is off: stopped, its slot
  // free. (Only once seen alive: one that just joined may not show yet.)
  for (std::size_t i = 0; i < fleet.size() && i < st.replicas.size(); ++i) {
    auto& r = st.replicas[i];
    const auto s = st.fleet->state(i);
    if (s == replica_state::off || s == replica_state::starting) continue;
    if (fleet[i].alive) {
      r.seen_alive = true;
      continue;
    }
    if (!r.seen_alive) continue;
    std::fprintf(stderr, "troupe: autoscaler: replica %zu died; its slot is free\n", i);
    stop_actors(r);
    st.fleet->lost(i);
  }
  std::vector<replica_load> loads(fleet.size());
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    const auto& f = fleet[i];
    loads[i] = {f.running, f.waiting, f.in_flight, f.queue_age_s, f.kv_use,
                f.draining && f.running == 0 && f.waiting == 0 && f.in_flight == 0};
  }
  fleet_window w;
  if (o.metrics) {
    auto t = mark(*o.metrics, &server_metrics::request_series::time_to_first_token);
    auto p = mark(*o.metrics, &server_metrics::request_series::time_per_output_token);
    w.ttft_p95_s = window_quantile(st.ttft, t, 0.95);
    w.tpot_p95_s = window_quantile(st.tpot, p, 0.95);
    st.ttft = std::move(t);
    st.tpot = std::move(p);
    const double tokens = tokens_so_far(*o.metrics);
    w.tokens_per_s = now > st.last_tick ? (tokens - st.tokens) / (now - st.last_tick) : 0;
    st.tokens = tokens;
  }
  st.last_tick = now;

  const auto d = st.fleet->decide(now, loads, w);
  const auto& v = d.view;
  const std::string reason(d.reason);
  if (d.desired != st.last_desired || reason != st.last_reason)
    std::fprintf(stderr,
                 "troupe: autoscaler: %d replica(s) wanted, %d serving, %d starting: %s (queue %lld, oldest %.2f s, "
                 "active %lld, TTFT p95 %.3f s, %.0f tokens/s)\n",
                 d.desired, v.serving, v.starting, reason.c_str(), static_cast<long long>(v.queue_depth), v.queue_age_s,
                 static_cast<long long>(v.active_seqs), v.ttft_p95_s, v.tokens_per_s);
  st.last_desired = d.desired;
  st.last_reason = reason;
  if (o.metrics) {
    o.metrics->autoscaler_desired.Set(d.desired);
    o.metrics->set_autoscaler_reason(reason);
  }
  act(self, d.actions);
  if (d.out_of_slots)
    std::fprintf(stderr, "troupe: autoscaler: no replica slot left (%zu in use); not starting one\n", o.fleet.slots);
  st.publish();
}

auto status_json(const autoscaler_state& st) -> std::string {
  std::ostringstream o;
  const auto& f = *st.fleet;
  o << R"({"policy":")" << f.policy().name() << R"(","desired":)" << st.last_desired << R"(,"reason":")"
    << st.last_reason << R"(","decisions":)" << f.decisions() << R"(,"scale_outs":)" << f.scale_outs()
    << R"(,"scale_ins":)" << f.scale_ins() << R"(,"replicas":[)";
  for (std::size_t i = 0; i < f.slots_used(); ++i)
    o << (i ? "," : "") << '"' << replica_state_name(f.state(i)) << '"';
  o << "]}";
  return o.str();
}

auto autoscaler(self_ptr self, autoscaler_options options) -> autoscaler_actor::behavior_type {
  auto& st = self->state;
  st.fleet = std::make_unique<fleet_lifecycle>(policy::make_autoscaling_policy(options.policy, options.target),
                                                options.fleet);
  st.options = std::move(options);
  st.replicas.resize(st.options.fleet.slots);
  st.last_desired = st.options.fleet.initial;
  if (st.options.metrics) {
    st.ttft = mark(*st.options.metrics, &server_metrics::request_series::time_to_first_token);
    st.tpot = mark(*st.options.metrics, &server_metrics::request_series::time_per_output_token);
    st.tokens = tokens_so_far(*st.options.metrics);
    st.options.metrics->autoscaler_desired.Set(st.options.fleet.initial);
  }
  st.last_tick = st.now_s();
  // Its own replicas stop with it (on exit, before the state goes).
  self->set_exit_handler([self](caf::exit_msg& m) {
    for (auto& r : self->state.replicas) stop_actors(r);
    self->quit(m.reason);
  });
  act(self, st.fleet->start());
  st.publish();
  if (st.options.interval_s > 0) self->delayed_send(self, seconds(st.options.interval_s), tick_atom_v);
  return {
      [self](tick_atom) {
        auto& st = self->state;
        self->request(st.options.router, std::chrono::seconds(10), fleet_atom_v)
            .then([self](const fleet_snapshot& f) { decide(self, f); }, [](caf::error&) {});
        if (st.options.interval_s > 0) self->delayed_send(self, seconds(st.options.interval_s), tick_atom_v);
      },
      [self](started_atom, started_replica& r) -> bool {
        auto& st = self->state;
        if (r.index < 0 || static_cast<std::size_t>(r.index) >= st.replicas.size()) return false;
        const auto i = static_cast<std::size_t>(r.index);
        if (st.fleet->state(i) != replica_state::starting) return false;
        if (!r.error.empty() || !r.scheduler) {
          std::fprintf(stderr, "troupe: autoscaler: replica %d failed to start: %s\n", r.index, r.error.c_str());
          st.fleet->lost(i);
          st.publish();
          return false;
        }
        st.replicas[i].actors = std::move(r.actors);
        const bool pooled = st.fleet->loaded(i) == replica_state::warm;
        std::fprintf(stderr, "troupe: autoscaler: replica %d loaded; %s\n", r.index,
                     pooled ? "in the warm pool" : "into rotation");
        // Joined (monitored, checked); one for the pool joins drained, out of
        // rotation from the start (a join, then a drain, let requests reach
        // it in between: fleet_test saw a warm replica serve under load).
        self->send(st.options.router, join_atom_v, r.index, caf::actor_cast<scheduler_actor>(r.scheduler), pooled,
                   false);
        st.publish();
        return true;
      },
      [self](status_atom) { return status_json(self->state); },
  };
}

} // namespace

auto spawn_autoscaler(caf::actor_system& sys, autoscaler_options options) -> autoscaler_actor {
  return sys.spawn(autoscaler, std::move(options));
}

} // namespace troupe
