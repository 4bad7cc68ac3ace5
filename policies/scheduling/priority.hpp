#pragma once
#include "policies/api/scheduling.hpp"

namespace troupe::policy {

/// Highest priority first, with aging so that nothing starves: a request's
/// effective priority grows by `aging_per_s` for every second it has waited
/// since arrival. Ties go to the earlier arrival. The victim is the running
/// request of lowest effective priority (the latest among equals).
class priority_scheduling final : public scheduling_policy {
public:
  explicit priority_scheduling(double aging_per_s = 0.1) : aging_per_s_(aging_per_s) {}
  auto name() const -> std::string_view override { return "priority"; }
  auto admission_order(const schedule_view& v) -> std::vector<std::size_t> override;
  auto preemption_victim(const schedule_view& v) -> std::size_t override;
  auto wants_service_reports() const -> bool override { return false; }

private:
  auto effective(const request_view& r, double now_s) const -> double;
  double aging_per_s_;
};

} // namespace troupe::policy
