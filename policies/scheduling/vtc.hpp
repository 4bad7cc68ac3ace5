#pragma once
#include "policies/api/scheduling.hpp"

#include <cstdint>
#include <map>
#include <set>

namespace troupe::policy {

/// Virtual Token Counter (Sheng et al., "Fairness in Serving Large Language
/// Models", OSDI'24): each tenant's counter adds the tokens it was served
/// (prompt tokens × w_prompt + output tokens × w_output); the waiting request
/// of the tenant with the smallest counter goes first. A tenant that becomes
/// active is lifted to the smallest counter among the tenants already active,
/// so idling earns no credit. The victim is a request of the tenant with the
/// largest counter (its latest admission). A request's weight (its tenant's
/// tier) divides what it is charged: weight 2 gets twice the share of 1.
class vtc_scheduling final : public scheduling_policy {
public:
  explicit vtc_scheduling(double w_prompt = 1.0, double w_output = 2.0) : w_prompt_(w_prompt), w_output_(w_output) {}
  auto name() const -> std::string_view override { return "vtc"; }
  auto admission_order(const schedule_view& v) -> std::vector<std::size_t> override;
  auto preemption_victim(const schedule_view& v) -> std::size_t override;
  void on_served(const request_view& r, std::int32_t num_prefill_tokens, std::int32_t num_decode_tokens) override;

  /// A tenant's counter (0 for one never seen); for tests and reports.
  auto counter(std::uint64_t tenant) const -> double;

private:
  void lift_new_tenants(const schedule_view& v);

  double w_prompt_, w_output_;
  std::map<std::uint64_t, double> counters_;
  std::set<std::uint64_t> active_; ///< tenants with waiting or running requests at the last look
};

} // namespace troupe::policy
