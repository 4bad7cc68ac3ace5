#include "engine/core/fleet_lifecycle.hpp"

#include "base/check.hpp"

#include <algorithm>

namespace troupe {

namespace {

/// Slot i's load: slots past the span read as empty.
auto load_of(std::span<const replica_load> loads, std::size_t i) -> const replica_load& {
  static constexpr replica_load none{};
  return i < loads.size() ? loads[i] : none;
}

} // namespace

auto replica_state_name(replica_state s) -> std::string_view {
  switch (s) {
    case replica_state::off: return "off";
    case replica_state::starting: return "starting";
    case replica_state::serving: return "serving";
    case replica_state::warm: return "warm";
    case replica_state::draining: return "draining";
  }
  return "";
}

fleet_lifecycle::fleet_lifecycle(std::unique_ptr<policy::autoscaling_policy> policy, const fleet_options& options)
  : policy_(std::move(policy)), options_(options), slots_(options.slots) {
  TROUPE_CHECK(policy_ != nullptr, "a fleet without an autoscaling policy");
  TROUPE_CHECK(options.initial >= 0 && static_cast<std::size_t>(options.initial) <= options.slots,
               "more initial replicas than slots");
  for (std::int32_t i = 0; i < options.initial; ++i) slots_[static_cast<std::size_t>(i)].state = replica_state::serving;
  used_ = static_cast<std::size_t>(options.initial);
}

auto fleet_lifecycle::count(replica_state s) const -> std::int32_t {
  return static_cast<std::int32_t>(std::count_if(slots_.begin(), slots_.end(), [s](const slot& r) { return r.state == s; }));
}

auto fleet_lifecycle::pooled() const -> std::int32_t {
  return static_cast<std::int32_t>(std::count_if(slots_.begin(), slots_.end(), [](const slot& r) {
    return r.state == replica_state::warm || (r.state == replica_state::starting && r.to_pool);
  }));
}

auto fleet_lifecycle::cold_start(bool to_pool, std::vector<fleet_action>& out) -> bool {
  const auto free = std::find_if(slots_.begin(), slots_.end(), [](const slot& r) { return r.state == replica_state::off; });
  if (free == slots_.end()) return false;
  free->state = replica_state::starting;
  free->to_pool = to_pool;
  free->ours = true;
  const auto i = static_cast<std::size_t>(free - slots_.begin());
  used_ = std::max(used_, i + 1);
  out.push_back({fleet_action::kind::start, i, to_pool});
  return true;
}

auto fleet_lifecycle::start() -> std::vector<fleet_action> {
  std::vector<fleet_action> out;
  for (auto n = options_.warm_pool - pooled(); n > 0 && cold_start(true, out); --n) {
  }
  return out;
}

auto fleet_lifecycle::loaded(std::size_t i) -> replica_state {
  auto& r = slots_.at(i);
  TROUPE_CHECK(r.state == replica_state::starting, "a replica loaded that was not starting");
  r.state = r.to_pool ? replica_state::warm : replica_state::serving;
  r.to_pool = false;
  return r.state;
}

void fleet_lifecycle::lost(std::size_t i) {
  slots_.at(i) = slot{};
}

auto fleet_lifecycle::decide(double now, std::span<const replica_load> loads, const fleet_window& window)
    -> fleet_decision {
  const auto n = slots_.size();
  fleet_decision d;
  d.view = observe(now, loads, window);
  const auto& v = d.view;
  const auto asked = policy_->decide(v);
  ++decisions_;
  d.desired = std::clamp(asked.desired, options_.min_replicas, options_.max_replicas);
  d.reason = asked.reason;
  const auto have = v.serving + v.starting;
  std::size_t drained_now = n; // retires at a later decision, its drain seen through
  if (d.desired > have) {
    scale_out(have, d);
  } else if (d.desired < have) {
    drained_now = scale_in(now, loads, d);
  } else {
    below_since_ = -1;
  }
  retire_drained(loads, drained_now, d.actions);
  refill_pool(d);
  return d;
}

auto fleet_lifecycle::observe(double now, std::span<const replica_load> loads, const fleet_window& window) const
    -> policy::fleet_view {
  const auto n = slots_.size();
  policy::fleet_view v;
  v.now = now;
  v.min_replicas = options_.min_replicas;
  v.max_replicas = options_.max_replicas;
  double kv = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto s = slots_[i].state;
    if (s == replica_state::starting && !slots_[i].to_pool) ++v.starting;
    if (s != replica_state::serving && s != replica_state::draining) continue;
    const auto& l = load_of(loads, i);
    v.queue_depth += l.waiting + l.in_flight;
    v.active_seqs += l.running;
    v.queue_age_s = std::max(v.queue_age_s, l.queue_age_s);
    if (s == replica_state::serving) ++v.serving, kv += l.kv_use;
  }
  v.kv_use = v.serving > 0 ? kv / v.serving : 0.0;
  v.ttft_p95_s = window.ttft_p95_s;
  v.tpot_p95_s = window.tpot_p95_s;
  v.tokens_per_s = window.tokens_per_s;
  return v;
}

void fleet_lifecycle::scale_out(std::int32_t have, fleet_decision& d) {
  const auto n = slots_.size();
  ++outs_;
  below_since_ = -1;
  for (const auto loaded : {replica_state::draining, replica_state::warm}) // in that order
    for (std::size_t i = 0; i < n && have < d.desired; ++i)
      if (slots_[i].state == loaded) {
        slots_[i].state = replica_state::serving;
        d.actions.push_back({fleet_action::kind::serve, i});
        ++have;
      }
  for (std::size_t i = 0; i < n && have < d.desired; ++i)
    if (slots_[i].state == replica_state::starting && slots_[i].to_pool) {
      slots_[i].to_pool = false; // already on its way: it serves once loaded
      ++have;
    }
  for (; have < d.desired; ++have)
    if (!cold_start(false, d.actions)) {
      d.out_of_slots = true;
      break;
    }
}

auto fleet_lifecycle::scale_in(double now, std::span<const replica_load> loads, fleet_decision& d) -> std::size_t {
  const auto n = slots_.size();
  std::size_t drained_now = n;
  if (below_since_ < 0) below_since_ = now;
  if (now - below_since_ >= options_.scale_in_delay_s && d.view.serving > options_.min_replicas) {
    const auto pick = scale_in_victim(loads);
    if (pick < n) {
      ++ins_;
      slots_[pick].state = replica_state::draining;
      d.actions.push_back({fleet_action::kind::drain, pick});
      drained_now = pick;
    }
    below_since_ = now; // the next one only after another delay
  }
  return drained_now;
}

auto fleet_lifecycle::scale_in_victim(std::span<const replica_load> loads) const -> std::size_t {
  const auto n = slots_.size();
  // The least busy of the fleet's own serving replicas, which drained
  // can be stopped; an initial one (never stopped, only parked) only
  // when none of its own serves.
  std::size_t pick = n;
  const auto work = [&](std::size_t i) {
    return load_of(loads, i).running + load_of(loads, i).waiting + load_of(loads, i).in_flight;
  };
  const auto better = [&](std::size_t i) {
    if (pick == n) return true;
    if (slots_[i].ours != slots_[pick].ours) return slots_[i].ours;
    return work(i) <= work(pick);
  };
  for (std::size_t i = 0; i < n; ++i)
    if (slots_[i].state == replica_state::serving && better(i)) pick = i;
  return pick;
}

void fleet_lifecycle::retire_drained(std::span<const replica_load> loads, std::size_t drained_now,
                                     std::vector<fleet_action>& out) {
  // Drained with nothing left: parked while the pool is short, else stopped.
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state != replica_state::draining || i == drained_now || !load_of(loads, i).idle) continue;
    const bool park = !slots_[i].ours || pooled() < options_.warm_pool;
    slots_[i].state = park ? replica_state::warm : replica_state::off;
    out.push_back({park ? fleet_action::kind::park : fleet_action::kind::stop, i});
  }
}

void fleet_lifecycle::refill_pool(fleet_decision& d) {
  for (auto k = options_.warm_pool - pooled(); k > 0; --k)
    if (!cold_start(true, d.actions)) {
      d.out_of_slots = true;
      break;
    }
}

} // namespace troupe
