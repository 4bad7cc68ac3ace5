#pragma once
// The built-in autoscaling policies. Each proposes a replica count from one
// signal; the autoscaler applies it (out at once, in slowly).

#include "policies/api/autoscaling.hpp"

namespace troupe::policy {

/// Requests per replica: enough replicas that the running and waiting
/// requests come to at most `target` per replica (KEDA's queue-length
/// scaler, HPA's averageValue).
class queue_depth_autoscaling final : public autoscaling_policy {
public:
  explicit queue_depth_autoscaling(double target_per_replica = 32) : target_(target_per_replica) {}
  auto name() const -> std::string_view override { return "queue_depth"; }
  auto decide(const fleet_view& v) -> scale_decision override;

private:
  double target_;
};

/// A TTFT objective: over it (or requests queued longer than it), one
/// replica more per interval, more when far over, unless replicas are still
/// starting; well under it (a third) with nothing queued, one fewer.
class ttft_slo_autoscaling final : public autoscaling_policy {
public:
  explicit ttft_slo_autoscaling(double target_s = 0.5) : target_(target_s) {}
  auto name() const -> std::string_view override { return "ttft_slo"; }
  auto decide(const fleet_view& v) -> scale_decision override;

private:
  double target_;
};

/// Throughput: enough replicas that each computes at most `utilisation` of
/// its capacity in tokens per second.
class tokens_per_second_autoscaling final : public autoscaling_policy {
public:
  explicit tokens_per_second_autoscaling(double capacity_per_replica = 20000, double utilisation = 0.7)
    : capacity_(capacity_per_replica), utilisation_(utilisation) {}
  auto name() const -> std::string_view override { return "tokens_per_second"; }
  auto decide(const fleet_view& v) -> scale_decision override;

private:
  double capacity_, utilisation_;
};

/// desired clamped to the view's [min, max].
auto clamp_replicas(const fleet_view& v, double desired) -> std::int32_t;

} // namespace troupe::policy
