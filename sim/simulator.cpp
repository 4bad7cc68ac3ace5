#include "sim/simulator.hpp"

#include "base/check.hpp"
#include "engine/core/batch_scheduler.hpp"
#include "engine/core/kv_cache_manager.hpp"
#include "engine/core/memory_manager.hpp"
#include "engine/core/prefix_cache.hpp"
#include "engine/core/replica_core.hpp"
#include "engine/core/router_core.hpp"
#include "policies/registry.hpp"
#include "sim/autoscaled_fleet.hpp"
#include "sim/router.hpp"
#include "sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
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

// One replica as the server runs it: its device's memory manager (the
// prefix cache over the device's blocks, leases, prefix matching) and the
// replica core the scheduler actor drives (the batch scheduler over a
// lease, refills, load reports). The messages between them are calls here.
struct replica {
  std::unique_ptr<policy::eviction_policy> eviction;
  memory_manager memory;
  replica_core core;
  bool prefix_caching;
  std::int32_t block_size;
  std::uint64_t submitted = 0, submitted_tokens = 0; ///< ever, for the router's in-flight count
  scheduler_output step; ///< the step under way; empty: the replica is idle
  step_result result;    ///< reused from step to step, as are the step and these
  std::vector<request_update> updates;
  double step_seconds = 0; ///< the step under way's, by the cost model

  replica(const replica_spec& r, std::unique_ptr<policy::eviction_policy> ev)
    : eviction(std::move(ev)),
      memory(r.kv_blocks, *eviction),
      // (The first lease is half the share, as the server's replica factory takes.)
      core({limits_of(r, r.max_model_len, r.host_blocks), kv_options_of(r), r.policy, r.kv_blocks, {}},
           memory.lease(std::max(1, r.kv_blocks / 2), 0)),
      prefix_caching(r.enable_prefix_caching),
      block_size(r.block_size) {}

  auto scheduler() -> batch_scheduler& { return core.scheduler(); }
  auto scheduler() const -> const batch_scheduler& { return core.scheduler(); }
  /// KV in use: held references but the lease's free blocks, of its share (as the server reports it).
  auto kv_use() const -> double {
    return static_cast<double>(core.lease().num_in_use()) / static_cast<double>(core.lease().capacity());
  }
  /// After a step or a refused submission: the lease's publishes and
  /// releases applied, and a refill when it runs low. True: a refill came
  /// back empty while starved, to be asked again shortly.
  auto settle_lease() -> bool {
    auto t = core.after_change();
    memory.apply(t.ops);
    return t.refill && refill();
  }
  auto refill() -> bool {
    const auto want = core.begin_refill();
    return want > 0 && core.refilled(memory.lease(want, 0));
  }
  /// The load report the router reads, as the scheduler actor sends it (coalesced).
  auto report(double now) -> std::optional<replica_report> {
    replica_report r;
    r.running = scheduler().num_running();
    r.waiting = scheduler().num_waiting();
    r.kv_use = kv_use();
    r.submitted = submitted;
    if (!core.report_due(r, now)) return std::nullopt;
    r.prefill_tokens = scheduler().prefill_tokens();
    r.decode_tokens = scheduler().decode_tokens();
    r.submitted_tokens = submitted_tokens;
    if (r.waiting > 0) r.queue_age_s = std::max(0.0, now - scheduler().oldest_waiting_arrival());
    return r;
  }
};

// An event on a replica's clock: a step ending, or (retry) a starved
// replica asking for blocks again. Ordered by time, then by when it was made.
struct step_event {
  double t;
  std::uint64_t seq;
  std::size_t replica;
  bool retry = false;
  auto operator>(const step_event& o) const -> bool { return t != o.t ? t > o.t : seq > o.seq; }
};

// The token a "model" samples: any id but 0, never an EOS (there is none).
auto sampled_token(std::uint64_t seed, request_id id, std::int32_t position, std::int64_t vocab) -> token_id {
  return token_at(seed, output_stream + static_cast<std::uint64_t>(id), static_cast<std::uint64_t>(position), vocab);
}

} // namespace

namespace {

// One run: the fleet, the router the server runs (router_core over the
// replicas' load reports), and the event loop over arrivals, conversation
// turns, step ends and the autoscaler's clock.
class fleet_run {
public:
  fleet_run(const scenario& sc, const run_options& options, run_result& out);
  void run();

private:
  void build_fleet();
  void start_step(std::size_t ri, double now);
  void record_step(std::size_t ri, double now);
  auto route(const sim_request& q, const policy::route_request& rq, std::span<const token_id> prompt)
      -> std::size_t;
  void submit(const sim_request& q, std::vector<token_id> prompt);
  void end_step(const step_event& ev);
  void on_update(const request_update& u, double now, double& gap, std::int64_t& gaps);
  void report(std::size_t ri, double now);
  auto load_of(std::size_t i) const -> autoscaled_fleet::replica_load;

  const scenario& sc_;
  const run_options& options_;
  run_result& out_;
  std::unique_ptr<cost_model> cost_;
  workload traffic_;
  std::vector<std::unique_ptr<replica>> replicas_;
  std::vector<double> weights_;
  std::optional<autoscaled_fleet> scaled_;
  std::optional<router_core> router_;
  bool by_prefix_ = false;
  std::priority_queue<step_event, std::vector<step_event>, std::greater<>> steps_;
  std::uint64_t seq_ = 0;
  std::int64_t vocab_ = 0;
  // Conversations ([chat]): a turn's prompt, kept until its answer is in,
  // and the next turns waiting for their think time to pass.
  struct turn_state {
    sim_request spec;
    std::vector<token_id> prompt;
  };
  struct due {
    double t;
    std::int64_t index;
    auto operator>(const due& o) const -> bool { return t != o.t ? t > o.t : index > o.index; }
  };
  std::unordered_map<std::int64_t, turn_state> live_turns_;    ///< by request index
  std::priority_queue<due, std::vector<due>, std::greater<>> follow_ups_;
  std::unordered_map<std::int64_t, turn_state> pending_turns_; ///< by index, until due
  std::int64_t next_index_ = 0;
};

fleet_run::fleet_run(const scenario& sc, const run_options& options, run_result& out)
    : sc_(sc), options_(options), out_(out), cost_(make_cost_model(sc)), traffic_(sc) {
  out_.sc = sc;
  out_.cost_description = cost_->describe();
  out_.trace_format = traffic_.trace_format();
  out_.trace_skipped = traffic_.trace_skipped();
  out_.tenant_names = traffic_.tenant_names();
  out_.requests.resize(static_cast<std::size_t>(traffic_.size()));
  build_fleet();
  // Replica states under the autoscaler; a fixed fleet serves throughout.
  scaled_.emplace(sc.autoscaler, replicas_.size(), out_);
  auto routing = policy::make_routing_policy(sc.routing);
  by_prefix_ = routing->reads_cached_blocks();
  router_.emplace(std::move(routing), replicas_.size(), weights_);
  out_.replica_busy.assign(replicas_.size(), 0.0);
  vocab_ = sc.cost.model.vocab;
  next_index_ = traffic_.size();
}

// The fleet: every replica spec's count, or with an autoscaler the
// server's slots (fleet_slots), each a copy of the first spec.
void fleet_run::build_fleet() {
  const auto& as = sc_.autoscaler;
  std::vector<const replica_spec*> fleet;
  if (as.enabled())
    fleet.assign(static_cast<std::size_t>(fleet_slots(as.initial_replicas(), as.max_replicas, as.warm_pool)),
                 &sc_.replicas.front());
  else
    for (const auto& spec : sc_.replicas)
      for (std::int32_t i = 0; i < spec.count; ++i) fleet.push_back(&spec);
  for (const auto* spec : fleet) {
    try {
      replicas_.push_back(std::make_unique<replica>(*spec, policy::make_eviction_policy(spec->eviction)));
    } catch (const std::invalid_argument& e) {
      throw scenario_error(std::string("replicas: ") + e.what());
    }
    weights_.push_back(spec->weight);
  }
}

auto fleet_run::load_of(std::size_t i) const -> autoscaled_fleet::replica_load {
  const auto& r = *replicas_[i];
  return {r.scheduler().num_running(), r.scheduler().num_waiting(), r.scheduler().oldest_waiting_arrival(),
          r.kv_use(), !r.step.empty()};
}

// The replica's load to the router, when the scheduler actor would send it.
void fleet_run::report(std::size_t ri, double now) {
  if (auto r = replicas_[ri]->report(now)) router_->report(ri, *r);
}

// The next step, as the scheduler actor takes it. Work that cannot run
// means blocks are short: the lease is settled and refilled, and blocks
// that came kick the step again (a refill that came back empty is asked
// again a millisecond later).
void fleet_run::start_step(std::size_t ri, double now) {
  replica& r = *replicas_[ri];
  r.scheduler().schedule(now, r.step);
  r.core.set_starved(r.step.scheduled.empty() && r.scheduler().has_work());
  if (r.step.empty()) {
    const auto free_before = r.core.lease().num_free();
    if (r.settle_lease()) steps_.push({now + 0.001, seq_++, ri, true});
    else if (r.core.starved() && r.core.lease().num_free() > free_before) start_step(ri, now);
    return;
  }
  const auto features = features_of(r.step);
  if (scaled_->enabled()) scaled_->note_tokens(features.tokens);
  r.step_seconds = std::max(cost_->step_seconds(features), 1e-9);
  steps_.push({now + r.step_seconds, seq_++, ri});
  record_step(ri, now);
}

void fleet_run::record_step(std::size_t ri, double now) {
  const replica& r = *replicas_[ri];
  const double dur = r.step_seconds, kv_use = r.kv_use();
  out_.kv_use_time += kv_use * dur;
  out_.busy_time += dur;
  out_.replica_busy[ri] += dur;
  out_.kv_use_peak = std::max(out_.kv_use_peak, kv_use);
  if (!options_.keep_steps) return;
  step_record s;
  s.start_s = now;
  s.duration_s = dur;
  s.replica = static_cast<std::int32_t>(ri);
  s.seqs = static_cast<std::int32_t>(r.step.scheduled.size());
  for (const auto& c : r.step.scheduled) {
    const bool decode = c.num_tokens == 1 && c.sample && c.num_computed_tokens > 0;
    (decode ? s.decode_tokens : s.prefill_tokens) += c.num_tokens;
  }
  s.running = static_cast<std::int32_t>(r.scheduler().num_running());
  s.waiting = static_cast<std::int32_t>(r.scheduler().num_waiting());
  s.kv_use = kv_use;
  out_.steps.push_back(s);
}

// The router's choice, as the server's router makes it: from the replicas'
// last reports and what it routed since, their readiness (the
// autoscaler's), and, for a policy that reads them, the prompt's blocks
// each device caches. One replica always serving: every policy picks it.
auto fleet_run::route(const sim_request& q, const policy::route_request& rq, std::span<const token_id> prompt)
    -> std::size_t {
  if (replicas_.size() == 1 && !scaled_->enabled()) return 0;
  for (std::size_t i = 0; i < replicas_.size(); ++i) router_->set_draining(i, !scaled_->serving(i));
  std::vector<std::int32_t> cached;
  if (by_prefix_)
    for (const auto& r : replicas_)
      cached.push_back(r->prefix_caching ? cached_prefix_blocks(r->memory.cache(), static_cast<std::uint64_t>(q.tenant) + 1,
                                                                prompt, r->block_size)
                                         : 0);
  return router_->route(rq, q.arrival_s, cached);
}

// A request arrives at the router, then at its replica: the prefix match
// at the device (once, when prefix caching is on), then the scheduler.
void fleet_run::submit(const sim_request& q, std::vector<token_id> prompt) {
  if (static_cast<std::size_t>(q.index) >= out_.requests.size()) out_.requests.resize(static_cast<std::size_t>(q.index) + 1);
  auto& rec = out_.requests[static_cast<std::size_t>(q.index)];
  rec.arrival_s = q.arrival_s;
  rec.prompt_tokens = q.prompt_tokens;
  rec.tenant = q.tenant;
  auto rq = session_of(q);
  rq.prompt_blocks = static_cast<std::int32_t>((prompt.size() - 1) / static_cast<std::size_t>(replicas_.front()->block_size));
  out_.prompt_blocks += static_cast<std::uint64_t>(rq.prompt_blocks);
  out_.end_s = std::max(out_.end_s, q.arrival_s);
  const auto ri = route(q, rq, prompt);
  if (ri == policy::no_replica) { // no replica serving: refused, as the server's 503
    rec.status = 503;
    return;
  }
  TROUPE_CHECK(ri < replicas_.size(), "the router named no replica");
  rec.replica = static_cast<std::int32_t>(ri);
  replica& rep = *replicas_[ri];
  request r;
  r.id = q.index + 1;
  r.prompt = std::move(prompt);
  if (q.turn + 1 < q.turns) live_turns_[q.index] = {q, r.prompt};
  r.sampling.max_tokens = q.output_tokens;
  r.sampling.ignore_eos = true;
  r.tenant = static_cast<std::uint64_t>(q.tenant) + 1;
  r.priority = q.priority;
  r.arrival_s = q.arrival_s;
  ++rep.submitted;
  rep.submitted_tokens += r.prompt.size();
  if (rep.prefix_caching) r.matched_blocks = rep.memory.match(r.tenant, r.prompt, rep.block_size, r.priority);
  const auto matched = r.matched_blocks;
  const auto result = rep.scheduler().submit(std::move(r));
  if (result.status != 0) {
    rec.status = result.status;
    live_turns_.erase(q.index); // the conversation ends here
    std::vector<block_op> ops;  // (the match's references go back)
    for (const block_id b : matched) ops.push_back({block_op::kind::release, b, {}, 0, 0});
    rep.memory.apply(ops);
  } else if (rep.step.empty()) {
    start_step(ri, q.arrival_s);
  }
  report(ri, q.arrival_s);
}

// A step ends: its tokens sampled, the scheduler updated, the lease
// settled, each request's figures recorded, and the next step begun.
void fleet_run::end_step(const step_event& ev) {
  replica& r = *replicas_[ev.replica];
  if (ev.retry) { // a starved replica asks for blocks again
    if (r.refill()) steps_.push({ev.t + 0.001, seq_++, ev.replica, true});
    else if (r.step.empty()) start_step(ev.replica, ev.t);
    return;
  }
  auto& result = r.result;
  result.sampled.clear();
  for (const auto& c : r.step.scheduled)
    if (c.sample)
      result.sampled.push_back(
          {c.id, {sampled_token(sc_.seed, c.id, c.num_computed_tokens + c.num_tokens, vocab_), 0.0f, {}, {}}, {}});
  r.scheduler().update(r.step, result, r.updates);
  r.scheduler().observe_step(r.step_seconds); // (the cost model's time paces prefill, as the wall clock does the server's)
  const bool retry = r.settle_lease(); // (publishes before the tokens go: a next turn finds its blocks)
  double gap = 0; // a run of equal inter-token gaps, added at once
  std::int64_t gaps = 0;
  for (const auto& u : r.updates) on_update(u, ev.t, gap, gaps);
  out_.itl.add_run(gap, gaps);
  out_.end_s = std::max(out_.end_s, ev.t);
  r.step.clear();
  if (retry) steps_.push({ev.t + 0.001, seq_++, ev.replica, true});
  start_step(ev.replica, ev.t);
  report(ev.replica, ev.t);
}

void fleet_run::on_update(const request_update& u, double now, double& gap, std::int64_t& gaps) {
  const auto i = static_cast<std::size_t>(u.id - 1);
  auto& rec = out_.requests[i];
  if (u.token) {
    if (rec.first_token_s < 0) {
      rec.first_token_s = now;
      if (scaled_->enabled()) scaled_->note_first_token(now - rec.arrival_s);
    } else if (const double g = now - rec.last_token_s; g == gap) {
      ++gaps;
    } else {
      out_.itl.add_run(gap, gaps);
      gap = g;
      gaps = 1;
    }
    rec.last_token_s = now;
    ++rec.output_tokens;
  }
  if (u.finished == finish_reason::none) return;
  rec.finish_s = now;
  // The conversation's next turn: all of this one, its answer, a new message.
  if (auto node = live_turns_.extract(static_cast<std::int64_t>(i)); !node.empty()) {
    auto& st = node.mapped();
    auto history = std::move(st.prompt);
    const auto prompt_len = static_cast<std::int32_t>(history.size());
    for (std::int32_t j = 0; j < rec.output_tokens; ++j) history.push_back(sampled_token(sc_.seed, u.id, prompt_len + j, vocab_));
    const auto next = traffic_.follow_up(st.spec, now, next_index_++, history);
    follow_ups_.push({next.arrival_s, next.index});
    pending_turns_.emplace(next.index, turn_state{next, std::move(history)});
  }
}

void fleet_run::run() {
  auto pending = traffic_.next();
  std::int64_t issued = 0;
  const auto progress_every = std::max<std::int64_t>(1, traffic_.size() / 200);
  std::vector<std::size_t> stopped; // replicas the autoscaler shut down: their caches go
  while (pending || !follow_ups_.empty() || !steps_.empty()) {
    const double t_arrival = pending ? pending->arrival_s : INFINITY;
    const double t_turn = follow_ups_.empty() ? INFINITY : follow_ups_.top().t;
    const double t_step = steps_.empty() ? INFINITY : steps_.top().t;
    const auto [t_ready, readying] = scaled_->next_ready();
    // The autoscaler's clock: decisions, then replicas coming up, before the traffic of that instant.
    if (scaled_->next_tick() <= std::min({t_arrival, t_turn, t_step, t_ready})) {
      (void)scaled_->tick([this](std::size_t i) { return load_of(i); }, stopped);
      for (const auto i : stopped) replicas_[i]->memory.drop_cached();
      stopped.clear();
    } else if (t_ready <= std::min({t_arrival, t_turn, t_step})) {
      scaled_->ready(readying, t_ready);
    } else if (std::min(t_arrival, t_turn) <= t_step) { // arrivals first: one arriving as a step ends joins the next
      if (t_arrival <= t_turn) {
        const sim_request q = *pending;
        pending = traffic_.next();
        std::vector<token_id> prompt;
        traffic_.prompt_of(q, prompt);
        submit(q, std::move(prompt));
        if (++issued % progress_every == 0 && options_.progress) options_.progress(issued, traffic_.size());
      } else {
        const auto index = follow_ups_.top().index;
        follow_ups_.pop();
        auto node = pending_turns_.extract(index);
        submit(node.mapped().spec, std::move(node.mapped().prompt));
      }
    } else {
      const step_event ev = steps_.top();
      steps_.pop();
      end_step(ev);
    }
  }
  scaled_->advance(out_.end_s);
  for (const auto& r : replicas_) {
    out_.preemptions += r->scheduler().num_preemptions();
    out_.swap_outs += r->scheduler().num_swap_outs();
    out_.prefix_queries += r->memory.cache().num_queries();
    out_.prefix_hits += r->memory.cache().num_hits();
  }
  if (options_.progress) options_.progress(traffic_.size(), traffic_.size());
}

} // namespace

auto simulate(const scenario& sc, const run_options& options) -> run_result {
  run_result out;
  fleet_run run(sc, options, out);
  run.run();
  return out;
}

} // namespace troupe::sim
