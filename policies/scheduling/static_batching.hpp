#pragma once
#include "policies/api/scheduling.hpp"

namespace troupe::policy {

/// Request-level batching, the baseline continuous batching is measured
/// against: a batch is admitted together (first come, first served) when
/// nothing runs, and the next waits until its longest member ends. While no
/// member has produced a token the batch is still forming and takes more.
class static_scheduling final : public scheduling_policy {
public:
  auto name() const -> std::string_view override { return "static"; }
  auto admission_order(const schedule_view& v) -> std::vector<std::size_t> override;
  auto preemption_victim(const schedule_view& v) -> std::size_t override;
  auto wants_service_reports() const -> bool override { return false; }
};

} // namespace troupe::policy
