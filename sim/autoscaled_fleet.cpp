#include "sim/autoscaled_fleet.hpp"

#include "policies/registry.hpp"

#include <algorithm>
#include <string>

namespace troupe::sim {

autoscaled_fleet::autoscaled_fleet(const autoscaler_spec& as, std::size_t replicas, run_result& out)
  : as_(as), out_(out), states_(replicas, state::serving), ready_at_(replicas, INFINITY), to_warm_(replicas, false) {
  out_.replica_loaded.assign(replicas, 0.0);
  if (!as.enabled()) return;
  scaler_ = policy::make_autoscaling_policy(as.policy, as.target);
  for (std::size_t i = 0; i < replicas; ++i)
    states_[i] = static_cast<std::int32_t>(i) < as.min_replicas                   ? state::serving
                 : static_cast<std::int32_t>(i) < as.min_replicas + as.warm_pool ? state::warm
                                                                                  : state::off;
  next_tick_ = as.interval_s;
}

auto autoscaled_fleet::count(state s) const -> std::int64_t { return std::count(states_.begin(), states_.end(), s); }

auto autoscaled_fleet::pooled() const -> std::int64_t {
  return count(state::warm) + std::count(to_warm_.begin(), to_warm_.end(), true);
}

void autoscaled_fleet::advance(double t) {
  if (t <= seconds_at_) return;
  out_.replica_seconds += static_cast<double>(states_.size() - static_cast<std::size_t>(count(state::off))) *
                          (t - seconds_at_);
  for (std::size_t i = 0; i < states_.size(); ++i)
    if (states_[i] != state::off) out_.replica_loaded[i] += t - seconds_at_;
  seconds_at_ = t;
}

auto autoscaled_fleet::next_ready() const -> std::pair<double, std::size_t> {
  std::pair<double, std::size_t> next{INFINITY, states_.size()};
  if (!enabled()) return next;
  for (std::size_t i = 0; i < states_.size(); ++i)
    if (states_[i] == state::starting && ready_at_[i] < next.first) next = {ready_at_[i], i};
  return next;
}

void autoscaled_fleet::ready(std::size_t i, double now) {
  advance(now);
  states_[i] = to_warm_[i] ? state::warm : state::serving;
  to_warm_[i] = false;
  ready_at_[i] = INFINITY;
}

void autoscaled_fleet::start(std::size_t i, double now, bool for_pool) {
  states_[i] = state::starting;
  ready_at_[i] = now + as_.cold_start_s;
  to_warm_[i] = for_pool;
}

void autoscaled_fleet::retire_idle(double now, const probe& load, std::vector<std::size_t>& stopped) {
  for (std::size_t i = 0; i < states_.size(); ++i) {
    if (states_[i] != state::draining) continue;
    const auto l = load(i);
    if (l.stepping || l.running != 0 || l.waiting != 0) continue;
    advance(now);
    states_[i] = pooled() < as_.warm_pool ? state::warm : state::off;
    if (states_[i] == state::off) stopped.push_back(i); // its KV cache goes with it
  }
}

// Out at once (draining replicas first, still loaded; then warm ones; then
// cold starts), in one drained replica per scale_in_delay_s of lower counts.
void autoscaled_fleet::tick(const probe& load, std::vector<std::size_t>& stopped) {
  const double now = next_tick_;
  next_tick_ += as_.interval_s;
  policy::fleet_view v;
  v.now = now;
  v.min_replicas = as_.min_replicas;
  v.max_replicas = as_.max_replicas;
  double oldest = INFINITY, kv = 0;
  std::vector<replica_load> loads(states_.size());
  for (std::size_t i = 0; i < states_.size(); ++i) {
    if (states_[i] == state::serving || states_[i] == state::draining) loads[i] = load(i);
    if (states_[i] == state::serving) ++v.serving, kv += loads[i].kv_use;
    if (states_[i] == state::starting && !to_warm_[i]) ++v.starting;
    if (states_[i] == state::serving || states_[i] == state::draining) {
      v.queue_depth += loads[i].waiting;
      v.active_seqs += loads[i].running;
      oldest = std::min(oldest, loads[i].oldest_arrival);
    }
  }
  v.queue_age_s = std::isfinite(oldest) ? now - oldest : 0.0;
  v.kv_use = v.serving > 0 ? kv / v.serving : 0.0;
  if (!window_ttft_.empty()) {
    std::sort(window_ttft_.begin(), window_ttft_.end());
    v.ttft_p95_s = window_ttft_[static_cast<std::size_t>(0.95 * static_cast<double>(window_ttft_.size() - 1))];
  }
  v.tokens_per_s = window_tokens_ / as_.interval_s;
  window_ttft_.clear();
  window_tokens_ = 0;
  const auto d = scaler_->decide(v);
  const auto desired = std::clamp(d.desired, as_.min_replicas, as_.max_replicas);
  out_.scale_events.push_back({now, v.serving, v.starting, desired, std::string(d.reason)});
  advance(now);
  std::int32_t have = v.serving + v.starting;
  const auto n = states_.size();
  if (desired > have) {
    below_since_ = -1;
    for (std::size_t i = 0; i < n && have < desired; ++i)
      if (states_[i] == state::draining) states_[i] = state::serving, ++have;
    for (std::size_t i = 0; i < n && have < desired; ++i)
      if (states_[i] == state::warm) states_[i] = state::serving, ++have;
    for (std::size_t i = 0; i < n && have < desired; ++i)
      if (states_[i] == state::starting && to_warm_[i]) to_warm_[i] = false, ++have; // already on its way
    for (std::size_t i = 0; i < n && have < desired; ++i)
      if (states_[i] == state::off) start(i, now, false), ++have;
    // Refill the warm pool behind them.
    auto warm = pooled();
    for (std::size_t i = 0; i < n && warm < as_.warm_pool; ++i)
      if (states_[i] == state::off) start(i, now, true), ++warm;
  } else if (desired < have) {
    if (below_since_ < 0) below_since_ = now;
    if (now - below_since_ >= as_.scale_in_delay_s && v.serving > as_.min_replicas) {
      // The serving replica with the least work drains: no new requests, its own finish.
      std::size_t pick = n;
      for (std::size_t i = 0; i < n; ++i)
        if (states_[i] == state::serving &&
            (pick == n || loads[i].running + loads[i].waiting < loads[pick].running + loads[pick].waiting))
          pick = i;
      if (pick < n) states_[pick] = state::draining;
      below_since_ = now; // the next one only after another delay
    }
  } else {
    below_since_ = -1;
  }
  retire_idle(now, load, stopped);
}

} // namespace troupe::sim
