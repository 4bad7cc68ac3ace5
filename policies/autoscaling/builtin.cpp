#include "policies/autoscaling/builtin.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::policy {

auto clamp_replicas(const fleet_view& v, double desired) -> std::int32_t {
  const double d = std::ceil(std::max(desired, 0.0));
  return static_cast<std::int32_t>(std::clamp(d, static_cast<double>(v.min_replicas), static_cast<double>(v.max_replicas)));
}

auto queue_depth_autoscaling::decide(const fleet_view& v) -> scale_decision {
  const double load = static_cast<double>(v.queue_depth + v.active_seqs);
  const auto desired = clamp_replicas(v, load / target_);
  const auto have = v.serving + v.starting;
  return {desired, desired > have ? "requests per replica over target"
                   : desired < have ? "requests per replica under target"
                                    : "requests per replica on target"};
}

auto ttft_slo_autoscaling::decide(const fleet_view& v) -> scale_decision {
  const auto have = v.serving + v.starting;
  const double worst = std::max(v.ttft_p95_s, v.queue_age_s);
  if (worst > target_) {
    // Replicas on their way answer it first: asking again every interval
    // while they load would climb to the maximum.
    if (v.starting > 0) return {clamp_replicas(v, have), "TTFT p95 over the objective, replicas starting"};
    // Far over: in proportion (a queue grows while replicas start).
    const double factor = std::min(worst / target_, 2.0);
    return {clamp_replicas(v, std::max(have + 1.0, v.serving * factor)), "TTFT p95 over the objective"};
  }
  if (v.queue_depth == 0 && worst < target_ / 3) return {clamp_replicas(v, have - 1.0), "TTFT p95 well under the objective"};
  return {clamp_replicas(v, have), "TTFT p95 within the objective"};
}

auto tokens_per_second_autoscaling::decide(const fleet_view& v) -> scale_decision {
  const auto desired = clamp_replicas(v, v.tokens_per_s / (capacity_ * utilisation_));
  const auto have = v.serving + v.starting;
  return {desired, desired > have ? "tokens per second over capacity"
                   : desired < have ? "tokens per second under capacity"
                                    : "tokens per second on target"};
}

} // namespace troupe::policy
