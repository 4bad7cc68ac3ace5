#include "sim/autoscaled_fleet.hpp"

#include "policies/registry.hpp"

#include <algorithm>
#include <string>

namespace troupe::sim {

autoscaled_fleet::autoscaled_fleet(const autoscaler_spec& as, std::size_t replicas, run_result& out)
  : as_(as), out_(out), ready_at_(replicas, INFINITY) {
  out_.replica_loaded.assign(replicas, 0.0);
  if (!as.enabled()) return;
  // Its slots are the fleet's replicas.
  lifecycle_.emplace(policy::make_autoscaling_policy(as.policy, as.target),
                     fleet_options{as.min_replicas, as.max_replicas, as.scale_in_delay_s, as.warm_pool,
                                   as.initial_replicas(), replicas});
  std::vector<std::size_t> none;
  act(lifecycle_->start(), 0.0, none); // the warm pool loads from the start, as the server's
  next_tick_ = as.interval_s;
}

auto autoscaled_fleet::loaded_count() const -> std::size_t {
  return enabled() ? ready_at_.size() - static_cast<std::size_t>(lifecycle_->count(replica_state::off)) : ready_at_.size();
}

void autoscaled_fleet::advance(double t) {
  if (t <= seconds_at_) return;
  out_.replica_seconds += static_cast<double>(loaded_count()) * (t - seconds_at_);
  for (std::size_t i = 0; i < ready_at_.size(); ++i)
    if (state(i) != replica_state::off) out_.replica_loaded[i] += t - seconds_at_;
  seconds_at_ = t;
}

auto autoscaled_fleet::next_ready() const -> std::pair<double, std::size_t> {
  std::pair<double, std::size_t> next{INFINITY, ready_at_.size()};
  for (std::size_t i = 0; i < ready_at_.size(); ++i)
    if (ready_at_[i] < next.first) next = {ready_at_[i], i};
  return next;
}

void autoscaled_fleet::ready(std::size_t i, double now) {
  advance(now);
  lifecycle_->loaded(i);
  ready_at_[i] = INFINITY;
}

void autoscaled_fleet::act(const std::vector<fleet_action>& actions, double now, std::vector<std::size_t>& stopped) {
  for (const auto& a : actions) {
    if (a.what == fleet_action::kind::start) ready_at_[a.replica] = now + as_.cold_start_s;
    if (a.what == fleet_action::kind::stop) stopped.push_back(a.replica); // its KV cache goes with it
  }
}

auto autoscaled_fleet::tick(const probe& load, std::vector<std::size_t>& stopped) -> fleet_decision {
  const double now = next_tick_;
  next_tick_ += as_.interval_s;
  std::vector<troupe::replica_load> loads(ready_at_.size());
  for (std::size_t i = 0; i < ready_at_.size(); ++i) {
    const auto s = lifecycle_->state(i);
    if (s != replica_state::serving && s != replica_state::draining) continue;
    const auto l = load(i);
    auto& f = loads[i];
    f.running = l.running;
    f.waiting = l.waiting;
    f.queue_age_s = std::isfinite(l.oldest_arrival) ? now - l.oldest_arrival : 0.0;
    f.kv_use = l.kv_use;
    f.idle = !l.stepping && l.running == 0 && l.waiting == 0;
  }
  fleet_window w;
  if (!window_ttft_.empty()) {
    std::sort(window_ttft_.begin(), window_ttft_.end());
    w.ttft_p95_s = window_ttft_[static_cast<std::size_t>(0.95 * static_cast<double>(window_ttft_.size() - 1))];
  }
  w.tokens_per_s = window_tokens_ / as_.interval_s;
  window_ttft_.clear();
  window_tokens_ = 0;
  advance(now);
  auto d = lifecycle_->decide(now, loads, w);
  out_.scale_events.push_back({now, d.view.serving, d.view.starting, d.desired, std::string(d.reason)});
  act(d.actions, now, stopped);
  return d;
}

} // namespace troupe::sim
