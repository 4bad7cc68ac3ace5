#include "policies/scheduling/sjf.hpp"

#include <algorithm>

namespace troupe::policy {
namespace {

auto job_length(const request_view& r) -> std::int64_t {
  return r.output_len_hint >= 0 ? r.output_len_hint : r.num_prompt_tokens;
}

auto work_left(const request_view& r) -> std::int64_t {
  const std::int64_t out = r.output_len_hint >= 0 ? r.output_len_hint : r.max_tokens;
  return std::max<std::int64_t>(0, r.num_prompt_tokens + out - r.num_computed_tokens);
}

} // namespace

auto sjf_scheduling::admission_order(const schedule_view& v) -> std::vector<std::size_t> {
  return order_by(v.waiting, job_length);
}

auto sjf_scheduling::preemption_victim(const schedule_view& v) -> std::size_t {
  std::size_t victim = 0;
  for (std::size_t i = 1; i < v.running.size(); ++i)
    if (work_left(v.running[i]) >= work_left(v.running[victim])) victim = i;
  return victim;
}

} // namespace troupe::policy
