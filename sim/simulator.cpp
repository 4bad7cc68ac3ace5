#include "sim/simulator.hpp"

#include "base/check.hpp"
#include "engine/core/batch_scheduler.hpp"
#include "engine/core/kv_cache_manager.hpp"
#include "engine/core/memory_manager.hpp"
#include "engine/core/prefix_cache.hpp"
#include "policies/registry.hpp"
#include "sim/autoscaled_fleet.hpp"
#include "sim/router.hpp"
#include "sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <queue>
#include <unordered_map>
#include <stdexcept>

namespace troupe::sim {

void latency_histogram::add_run(double seconds, std::int64_t n) {
  if (n <= 0) return;
  count_ += n;
  double s = sum_;
  for (std::int64_t i = 0; i < n; ++i) s += seconds;
  sum_ = s;
  // The gaps of one step's decodes are mostly equal: one logarithm for them all.
  if (seconds != last_value_) {
    const double x = std::max(seconds, 1e-6);
    last_bucket_ = std::min(static_cast<std::size_t>(std::log10(x / 1e-6) * k_per_decade), buckets_.size() - 1);
    last_value_ = seconds;
  }
  buckets_[last_bucket_] += n;
}

auto latency_histogram::quantile(double q) const -> double {
  if (count_ == 0) return 0;
  const auto rank = static_cast<std::int64_t>(q * static_cast<double>(count_ - 1));
  std::int64_t seen = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen > rank) return 1e-6 * std::pow(10.0, (static_cast<double>(b) + 0.5) / k_per_decade);
  }
  return 0;
}

namespace {

// One replica: the server's core objects, as a scheduler actor owns them,
// but with the device's prefix cache itself as its block source.
struct replica {
  std::unique_ptr<policy::eviction_policy> eviction;
  std::unique_ptr<policy::scheduling_policy> policy;
  prefix_cache cache;
  kv_cache_manager kv;
  batch_scheduler core;
  scheduler_output step; ///< the step under way; empty: the replica is idle
  step_result result;    ///< reused from step to step, as are the step and these
  std::vector<request_update> updates;
  double step_seconds = 0; ///< the step under way's, by the cost model

  replica(const replica_spec& r, std::unique_ptr<policy::eviction_policy> ev,
          std::unique_ptr<policy::scheduling_policy> pol)
    : eviction(std::move(ev)),
      policy(std::move(pol)),
      cache(r.kv_blocks, *eviction),
      kv(cache, kv_options_of(r)),
      core(limits_of(r, r.max_model_len, r.host_blocks), kv, *policy, {}) {}

  auto kv_use() const -> double { return static_cast<double>(cache.num_referenced()) / cache.num_blocks(); }

};

// A step ending: ordered by time, then by when it was scheduled.
struct step_event {
  double t;
  std::uint64_t seq;
  std::size_t replica;
  auto operator>(const step_event& o) const -> bool { return t != o.t ? t > o.t : seq > o.seq; }
};

// The token a "model" samples: any id but 0, never an EOS (there is none).
auto sampled_token(std::uint64_t seed, request_id id, std::int32_t position, std::int64_t vocab) -> token_id {
  return token_at(seed, output_stream + static_cast<std::uint64_t>(id), static_cast<std::uint64_t>(position), vocab);
}

} // namespace

auto simulate(const scenario& sc, const run_options& options) -> run_result {
  run_result out;
  out.sc = sc;
  const auto cost = make_cost_model(sc);
  out.cost_description = cost->describe();
  workload traffic(sc);
  out.trace_format = traffic.trace_format();
  out.trace_skipped = traffic.trace_skipped();
  out.tenant_names = traffic.tenant_names();
  out.requests.resize(static_cast<std::size_t>(traffic.size()));

  // The fleet: every replica spec's count, or with an autoscaler the
  // server's slots (fleet_slots), each a copy of the first spec.
  const auto& as = sc.autoscaler;
  std::vector<const replica_spec*> fleet;
  if (as.enabled())
    fleet.assign(static_cast<std::size_t>(fleet_slots(as.initial_replicas(), as.max_replicas, as.warm_pool)),
                 &sc.replicas.front());
  else
    for (const auto& spec : sc.replicas)
      for (std::int32_t i = 0; i < spec.count; ++i) fleet.push_back(&spec);
  std::vector<std::unique_ptr<replica>> replicas;
  std::vector<double> weights;
  for (const auto* spec : fleet) {
    try {
      replicas.push_back(std::make_unique<replica>(*spec, policy::make_eviction_policy(spec->eviction),
                                                   policy::make_scheduling_policy(spec->policy)));
    } catch (const std::invalid_argument& e) {
      throw scenario_error(std::string("replicas: ") + e.what());
    }
    weights.push_back(spec->weight);
  }
  // Replica states under the autoscaler; a fixed fleet serves throughout.
  autoscaled_fleet scaled(as, replicas.size(), out);
  const auto load_of = [&](std::size_t i) {
    const auto& r = *replicas[i];
    return autoscaled_fleet::replica_load{r.core.num_running(), r.core.num_waiting(), r.core.oldest_waiting_arrival(),
                                          r.kv_use(), !r.step.empty()};
  };
  std::vector<std::size_t> stopped; // replicas the autoscaler shut down: their caches go
  const auto forget_stopped = [&] {
    for (const auto i : stopped) replicas[i]->cache.drop_cached();
    stopped.clear();
  };

  std::priority_queue<step_event, std::vector<step_event>, std::greater<>> steps;
  std::uint64_t seq = 0;
  const auto routing = policy::make_routing_policy(sc.routing);
  const bool by_prefix = routing->reads_cached_blocks();
  std::vector<policy::replica_view> views(replicas.size());
  out.replica_busy.assign(replicas.size(), 0.0);
  const auto vocab = sc.cost.model.vocab;
  const auto progress_every = std::max<std::int64_t>(1, traffic.size() / 200);

  const auto start_step = [&](std::size_t ri, double now) {
    replica& r = *replicas[ri];
    r.core.schedule(now, r.step);
    if (r.step.empty()) return;
    const auto features = features_of(r.step);
    if (scaled.enabled()) scaled.note_tokens(features.tokens);
    const double dur = std::max(cost->step_seconds(features), 1e-9);
    r.step_seconds = dur;
    steps.push({now + dur, seq++, ri});
    const double kv_use = r.kv_use();
    out.kv_use_time += kv_use * dur;
    out.busy_time += dur;
    out.replica_busy[ri] += dur;
    out.kv_use_peak = std::max(out.kv_use_peak, kv_use);
    if (options.keep_steps) {
      step_record s;
      s.start_s = now;
      s.duration_s = dur;
      s.replica = static_cast<std::int32_t>(ri);
      s.seqs = static_cast<std::int32_t>(r.step.scheduled.size());
      for (const auto& c : r.step.scheduled) {
        const bool decode = c.num_tokens == 1 && c.sample && c.num_computed_tokens > 0;
        (decode ? s.decode_tokens : s.prefill_tokens) += c.num_tokens;
      }
      s.running = static_cast<std::int32_t>(r.core.num_running());
      s.waiting = static_cast<std::int32_t>(r.core.num_waiting());
      s.kv_use = kv_use;
      out.steps.push_back(s);
    }
  };

  // Conversations ([chat]): a turn's prompt, kept until its answer is in,
  // and the next turns waiting for their think time to pass.
  struct turn_state {
    sim_request spec;
    std::vector<token_id> prompt;
  };
  std::unordered_map<std::int64_t, turn_state> live_turns; ///< by request index
  struct due {
    double t;
    std::int64_t index;
    auto operator>(const due& o) const -> bool { return t != o.t ? t > o.t : index > o.index; }
  };
  std::priority_queue<due, std::vector<due>, std::greater<>> follow_ups;
  std::unordered_map<std::int64_t, turn_state> pending_turns; ///< by index, until due

  const auto submit = [&](const sim_request& q, std::vector<token_id> prompt) {
    if (static_cast<std::size_t>(q.index) >= out.requests.size()) {
      out.requests.resize(static_cast<std::size_t>(q.index) + 1);
    }
    auto& rec = out.requests[static_cast<std::size_t>(q.index)];
    rec.arrival_s = q.arrival_s;
    rec.prompt_tokens = q.prompt_tokens;
    rec.tenant = q.tenant;
    auto rq = session_of(q);
    rq.prompt_blocks = static_cast<std::int32_t>((prompt.size() - 1) / static_cast<std::size_t>(replicas.front()->kv.options().block_size));
    out.prompt_blocks += static_cast<std::uint64_t>(rq.prompt_blocks);
    // One replica always serving: every policy picks it (no view to build).
    std::size_t ri = 0;
    if (replicas.size() > 1 || as.enabled()) {
      // The cluster as a router sees it: readiness, load now, the prompt's cached blocks.
      for (std::size_t i = 0; i < replicas.size(); ++i) {
        auto& v = views[i];
        const auto& core = replicas[i]->core;
        v.id = i;
        v.ready = scaled.serving(i);
        v.weight = weights[i];
        v.running = core.num_running();
        v.waiting = core.num_waiting();
        v.prefill_tokens = core.prefill_tokens();
        v.decode_tokens = core.decode_tokens();
        v.kv_use = replicas[i]->kv_use();
        v.cached_blocks = by_prefix ? cached_prefix_blocks(replicas[i]->cache, static_cast<std::uint64_t>(q.tenant) + 1,
                                                           prompt, replicas[i]->kv.options().block_size)
                                    : 0;
      }
      ri = routing->route({q.arrival_s, rq, views});
    }
    if (ri == policy::no_replica) { // no replica serving: refused, as the server's 503
      rec.status = 503;
      out.end_s = std::max(out.end_s, q.arrival_s);
      return;
    }
    TROUPE_CHECK(ri < replicas.size(), "the router named no replica");
    rec.replica = static_cast<std::int32_t>(ri);
    request r;
    r.id = q.index + 1;
    r.prompt = std::move(prompt);
    if (q.turn + 1 < q.turns) live_turns[q.index] = {q, r.prompt};
    r.sampling.max_tokens = q.output_tokens;
    r.sampling.ignore_eos = true;
    r.tenant = static_cast<std::uint64_t>(q.tenant) + 1;
    r.priority = q.priority;
    r.arrival_s = q.arrival_s;
    const auto result = replicas[ri]->core.submit(std::move(r));
    out.end_s = std::max(out.end_s, q.arrival_s);
    if (result.status != 0) {
      rec.status = result.status;
      live_turns.erase(q.index); // the conversation ends here
    } else if (replicas[ri]->step.empty()) {
      start_step(ri, q.arrival_s);
    }
  };

  auto pending = traffic.next();
  std::int64_t issued = 0, next_index = traffic.size();
  while (pending || !follow_ups.empty() || !steps.empty()) {
    const double t_arrival = pending ? pending->arrival_s : INFINITY;
    const double t_turn = follow_ups.empty() ? INFINITY : follow_ups.top().t;
    const double t_step = steps.empty() ? INFINITY : steps.top().t;
    const auto [t_ready, readying] = scaled.next_ready();
    // The autoscaler's clock: decisions, then replicas coming up, before the traffic of that instant.
    if (scaled.next_tick() <= std::min({t_arrival, t_turn, t_step, t_ready})) {
      (void)scaled.tick(load_of, stopped);
      forget_stopped();
      continue;
    }
    if (t_ready <= std::min({t_arrival, t_turn, t_step})) {
      scaled.ready(readying, t_ready);
      continue;
    }
    // Arrivals first at equal times: a request arriving as a step ends joins the next.
    if (std::min(t_arrival, t_turn) <= t_step) {
      if (t_arrival <= t_turn) {
        const sim_request q = *pending;
        pending = traffic.next();
        std::vector<token_id> prompt;
        traffic.prompt_of(q, prompt);
        submit(q, std::move(prompt));
        if (++issued % progress_every == 0 && options.progress) options.progress(issued, traffic.size());
      } else {
        const auto index = follow_ups.top().index;
        follow_ups.pop();
        auto node = pending_turns.extract(index);
        submit(node.mapped().spec, std::move(node.mapped().prompt));
      }
      continue;
    }
    const step_event ev = steps.top();
    steps.pop();
    replica& r = *replicas[ev.replica];
    auto& result = r.result;
    result.sampled.clear();
    for (const auto& c : r.step.scheduled)
      if (c.sample) result.sampled.push_back({c.id, {sampled_token(sc.seed, c.id, c.num_computed_tokens + c.num_tokens, vocab), 0.0f, {}, {}}, {}});
    r.core.update(r.step, result, r.updates);
    r.core.observe_step(r.step_seconds); // (the cost model's time paces prefill, as the wall clock does the server's)
    double gap = 0; // a run of equal inter-token gaps, added at once
    std::int64_t gaps = 0;
    for (const auto& u : r.updates) {
      const auto i = static_cast<std::size_t>(u.id - 1);
      auto& rec = out.requests[i];
      if (u.token) {
        if (rec.first_token_s < 0) {
          rec.first_token_s = ev.t;
          if (scaled.enabled()) scaled.note_first_token(ev.t - rec.arrival_s);
        } else if (const double g = ev.t - rec.last_token_s; g == gap) {
          ++gaps;
        } else {
          out.itl.add_run(gap, gaps);
          gap = g;
          gaps = 1;
        }
        rec.last_token_s = ev.t;
        ++rec.output_tokens;
      }
      if (u.finished == finish_reason::none) continue;
      rec.finish_s = ev.t;
      // The conversation's next turn: all of this one, its answer, a new message.
      if (auto node = live_turns.extract(static_cast<std::int64_t>(i)); !node.empty()) {
        auto& st = node.mapped();
        auto history = std::move(st.prompt);
        const auto prompt_len = static_cast<std::int32_t>(history.size());
        for (std::int32_t j = 0; j < rec.output_tokens; ++j) history.push_back(sampled_token(sc.seed, u.id, prompt_len + j, vocab));
        const auto next = traffic.follow_up(st.spec, ev.t, next_index++, history);
        follow_ups.push({next.arrival_s, next.index});
        pending_turns.emplace(next.index, turn_state{next, std::move(history)});
      }
    }
    out.itl.add_run(gap, gaps);
    out.end_s = std::max(out.end_s, ev.t);
    start_step(ev.replica, ev.t);
  }
  scaled.advance(out.end_s);
  for (const auto& r : replicas) {
    out.preemptions += r->core.num_preemptions();
    out.swap_outs += r->core.num_swap_outs();
    out.prefix_queries += r->cache.num_queries();
    out.prefix_hits += r->cache.num_hits();
  }
  if (options.progress) options.progress(traffic.size(), traffic.size());
  return out;
}

} // namespace troupe::sim
