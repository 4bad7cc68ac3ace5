#pragma once
#include "policies/api/scheduling.hpp"

namespace troupe::policy {

/// Shortest job first: by the output-length hint where a request has one,
/// else by prompt length; ties go to the earlier arrival. The victim is the
/// running request with the most work left.
class sjf_scheduling final : public scheduling_policy {
public:
  auto name() const -> std::string_view override { return "sjf"; }
  auto admission_order(const schedule_view& v) -> std::vector<std::size_t> override;
  auto preemption_victim(const schedule_view& v) -> std::size_t override;
  auto wants_service_reports() const -> bool override { return false; }
};

} // namespace troupe::policy
