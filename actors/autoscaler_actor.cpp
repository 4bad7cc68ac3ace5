#include "actors/autoscaler_actor.hpp"

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

enum class replica_state : std::uint8_t { off, starting, serving, warm, draining };

auto state_name(replica_state s) -> const char* {
  switch (s) {
    case replica_state::off: return "off";
    case replica_state::starting: return "starting";
    case replica_state::serving: return "serving";
    case replica_state::warm: return "warm";
    case replica_state::draining: return "draining";
  }
  return "";
}

struct replica_record {
  replica_state state = replica_state::off;
  bool to_pool = false; ///< starting: joins the warm pool rather than the rotation
  std::vector<caf::actor> actors; ///< what to stop on retirement (none for the initial replicas)
  bool seen_alive = false;        ///< the router has shown it alive (so a later "not alive" means it died)
};

struct autoscaler_state {
  autoscaler_options options;
  std::unique_ptr<policy::autoscaling_policy> policy;
  std::vector<replica_record> replicas;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  double last_change = -1e300; ///< when it last scaled (either way)
  std::int32_t last_desired = 0; ///< the last decision's count
  std::string last_reason;      ///< and its reason
  histogram_mark ttft, tpot;
  double tokens = 0;     ///< prompt + generated tokens counted at the last tick
  double last_tick = 0;
  std::int64_t decisions = 0, outs = 0, ins = 0;

  auto now_s() const -> double {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  auto count(replica_state s) const -> std::int32_t {
    return static_cast<std::int32_t>(
        std::count_if(replicas.begin(), replicas.end(), [s](const auto& r) { return r.state == s; }));
  }
  void publish() {
    if (!options.metrics) return;
    for (const auto s : {replica_state::starting, replica_state::serving, replica_state::warm, replica_state::draining})
      options.metrics->autoscaler_replicas(state_name(s)).Set(count(s));
  }
};

using self_ptr = autoscaler_actor::stateful_pointer<autoscaler_state>;

auto seconds(double s) -> std::chrono::microseconds {
  return std::chrono::microseconds(static_cast<std::int64_t>(s * 1e6));
}

// A cold start on a thread of its own; its replica comes back as a message.
void cold_start(self_ptr self, bool to_pool) {
  auto& st = self->state;
  std::size_t i = 0;
  while (i < st.replicas.size() && st.replicas[i].state != replica_state::off) ++i;
  if (i >= static_cast<std::size_t>(st.options.capacity)) {
    std::fprintf(stderr, "troupe: autoscaler: no replica slot left (%d in use); not starting one\n",
                 st.options.capacity);
    return;
  }
  if (i == st.replicas.size()) st.replicas.emplace_back();
  st.replicas[i].state = replica_state::starting;
  st.replicas[i].to_pool = to_pool;
  const auto index = static_cast<std::int32_t>(i);
  std::fprintf(stderr, "troupe: autoscaler: starting replica %d%s\n", index, to_pool ? " (for the warm pool)" : "");
  auto back = caf::actor_cast<autoscaler_actor>(self);
  self->spawn<caf::detached>([factory = st.options.start, index, back](caf::event_based_actor* worker) {
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

void retire(self_ptr self, std::size_t i) {
  auto& st = self->state;
  auto& r = st.replicas[i];
  // (The initial replicas, which it did not start, are never stopped.)
  const bool park = r.actors.empty() || st.count(replica_state::warm) < st.options.warm_pool;
  std::fprintf(stderr, "troupe: autoscaler: replica %zu drained; %s\n", i, park ? "parked in the warm pool" : "stopped");
  if (park) {
    r.state = replica_state::warm; // (still drained at the router: out of rotation, loaded)
    return;
  }
  for (auto& a : r.actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  r.actors.clear();
  r.state = replica_state::off;
  r.seen_alive = false;
}

void decide(self_ptr self, const fleet_snapshot& fleet) {
  auto& st = self->state;
  const double now = st.now_s();
  auto& o = st.options;
  policy::fleet_view v;
  v.now = now;
  v.min_replicas = o.min_replicas;
  v.max_replicas = o.max_replicas;
  v.starting = static_cast<std::int32_t>(std::count_if(st.replicas.begin(), st.replicas.end(), [](const auto& r) {
    return r.state == replica_state::starting && !r.to_pool;
  }));
  // A replica that died (its scheduler crashed) is off: stopped, its slot
  // free. (Only once seen alive: one that just joined may not show yet.)
  for (std::size_t i = 0; i < fleet.size() && i < st.replicas.size(); ++i) {
    auto& r = st.replicas[i];
    if (r.state == replica_state::off || r.state == replica_state::starting) continue;
    if (fleet[i].alive) {
      r.seen_alive = true;
      continue;
    }
    if (!r.seen_alive) continue;
    std::fprintf(stderr, "troupe: autoscaler: replica %zu died; its slot is free\n", i);
    for (auto& a : r.actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    r.actors.clear();
    r.state = replica_state::off;
    r.seen_alive = false;
  }
  v.serving = st.count(replica_state::serving);
  double kv = 0;
  for (std::size_t i = 0; i < fleet.size() && i < st.replicas.size(); ++i) {
    const auto& f = fleet[i];
    if (st.replicas[i].state != replica_state::serving && st.replicas[i].state != replica_state::draining) continue;
    v.queue_depth += f.waiting + f.in_flight;
    v.active_seqs += f.running;
    v.queue_age_s = std::max(v.queue_age_s, f.queue_age_s);
    if (st.replicas[i].state == replica_state::serving) kv += f.kv_use;
  }
  v.kv_use = v.serving > 0 ? kv / v.serving : 0;
  if (o.metrics) {
    auto t = mark(*o.metrics, &server_metrics::request_series::time_to_first_token);
    auto p = mark(*o.metrics, &server_metrics::request_series::time_per_output_token);
    v.ttft_p95_s = window_quantile(st.ttft, t, 0.95);
    v.tpot_p95_s = window_quantile(st.tpot, p, 0.95);
    st.ttft = std::move(t);
    st.tpot = std::move(p);
    const double tokens = tokens_so_far(*o.metrics);
    v.tokens_per_s = now > st.last_tick ? (tokens - st.tokens) / (now - st.last_tick) : 0;
    st.tokens = tokens;
  }
  st.last_tick = now;

  const auto d = st.policy->decide(v);
  ++st.decisions;
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

  const auto have = v.serving + v.starting;
  if (d.desired > have) {
    ++st.outs;
    st.last_change = now;
    for (auto n = d.desired - have; n > 0; --n) {
      // The warm pool first: into rotation at once.
      auto warm = std::find_if(st.replicas.begin(), st.replicas.end(),
                               [](const auto& r) { return r.state == replica_state::warm; });
      if (warm != st.replicas.end()) {
        warm->state = replica_state::serving;
        const auto i = static_cast<std::int32_t>(warm - st.replicas.begin());
        std::fprintf(stderr, "troupe: autoscaler: replica %d from the warm pool into rotation\n", i);
        self->send(o.router, drain_atom_v, i, false);
        continue;
      }
      // A draining one is loaded too: it stays.
      auto draining = std::find_if(st.replicas.begin(), st.replicas.end(),
                                   [](const auto& r) { return r.state == replica_state::draining; });
      if (draining != st.replicas.end()) {
        draining->state = replica_state::serving;
        self->send(o.router, drain_atom_v, static_cast<std::int32_t>(draining - st.replicas.begin()), false);
        continue;
      }
      cold_start(self, false);
    }
  } else if (d.desired < v.serving && now - st.last_change >= o.scale_in_delay_s) {
    // One per delay, the last serving one (started last), drained first.
    for (auto i = st.replicas.size(); i-- > 0;)
      if (st.replicas[i].state == replica_state::serving) {
        ++st.ins;
        st.last_change = now;
        st.replicas[i].state = replica_state::draining;
        std::fprintf(stderr, "troupe: autoscaler: draining replica %zu\n", i);
        self->send(o.router, drain_atom_v, static_cast<std::int32_t>(i), true);
        break;
      }
  }
  // Drained: nothing running, waiting or on its way.
  for (std::size_t i = 0; i < st.replicas.size() && i < fleet.size(); ++i)
    if (st.replicas[i].state == replica_state::draining && fleet[i].draining && fleet[i].running == 0 &&
        fleet[i].waiting == 0 && fleet[i].in_flight == 0)
      retire(self, i);
  // The warm pool refilled (counting those on their way to it).
  const auto pooled = st.count(replica_state::warm) +
                      static_cast<std::int32_t>(std::count_if(st.replicas.begin(), st.replicas.end(), [](const auto& r) {
                        return r.state == replica_state::starting && r.to_pool;
                      }));
  for (auto n = o.warm_pool - pooled; n > 0; --n) cold_start(self, true);
  st.publish();
}

auto status_json(const autoscaler_state& st) -> std::string {
  std::ostringstream o;
  o << R"({"policy":")" << st.policy->name() << R"(","desired":)" << st.last_desired << R"(,"reason":")"
    << st.last_reason << R"(","decisions":)" << st.decisions << R"(,"scale_outs":)" << st.outs
    << R"(,"scale_ins":)" << st.ins << R"(,"replicas":[)";
  for (std::size_t i = 0; i < st.replicas.size(); ++i)
    o << (i ? "," : "") << '"' << state_name(st.replicas[i].state) << '"';
  o << "]}";
  return o.str();
}

auto autoscaler(self_ptr self, autoscaler_options options) -> autoscaler_actor::behavior_type {
  auto& st = self->state;
  st.policy = policy::make_autoscaling_policy(options.policy, options.target);
  st.options = std::move(options);
  st.replicas.resize(static_cast<std::size_t>(st.options.initial));
  for (auto& r : st.replicas) r.state = replica_state::serving;
  st.last_desired = st.options.initial;
  if (st.options.metrics) {
    st.ttft = mark(*st.options.metrics, &server_metrics::request_series::time_to_first_token);
    st.tpot = mark(*st.options.metrics, &server_metrics::request_series::time_per_output_token);
    st.tokens = tokens_so_far(*st.options.metrics);
    st.options.metrics->autoscaler_desired.Set(st.options.initial);
  }
  // Its own replicas stop with it (on exit, before the state goes).
  self->set_exit_handler([self](caf::exit_msg& m) {
    for (auto& r : self->state.replicas)
      for (auto& a : r.actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    self->quit(m.reason);
  });
  for (auto n = st.options.warm_pool; n > 0; --n) cold_start(self, true);
  st.publish();
  self->delayed_send(self, seconds(st.options.interval_s), tick_atom_v);
  return {
      [self](tick_atom) {
        self->request(self->state.options.router, std::chrono::seconds(10), fleet_atom_v)
            .then([self](const fleet_snapshot& f) { decide(self, f); }, [](caf::error&) {});
        self->delayed_send(self, seconds(self->state.options.interval_s), tick_atom_v);
      },
      [self](started_atom, started_replica& r) -> bool {
        auto& st = self->state;
        if (r.index < 0 || static_cast<std::size_t>(r.index) >= st.replicas.size()) return false;
        auto& rec = st.replicas[static_cast<std::size_t>(r.index)];
        if (!r.error.empty() || !r.scheduler) {
          std::fprintf(stderr, "troupe: autoscaler: replica %d failed to start: %s\n", r.index, r.error.c_str());
          rec.state = replica_state::off;
          st.publish();
          return false;
        }
        rec.actors = std::move(r.actors);
        rec.state = rec.to_pool ? replica_state::warm : replica_state::serving;
        std::fprintf(stderr, "troupe: autoscaler: replica %d loaded; %s\n", r.index,
                     rec.to_pool ? "in the warm pool" : "into rotation");
        // Joined (monitored, checked); one for the pool joins drained, out of
        // rotation from the start (a join, then a drain, let requests reach
        // it in between: fleet_test saw a warm replica serve under load).
        self->send(st.options.router, join_atom_v, r.index, caf::actor_cast<scheduler_actor>(r.scheduler), rec.to_pool,
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
