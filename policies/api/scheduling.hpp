#pragma once
// The scheduling policy kind: in which order waiting requests are admitted,
// and which running request gives way when KV blocks run out. The scheduler
// mechanism (engine/core) owns the queues, the token budget and the blocks;
// a policy sees plain views and answers with indices. Time comes in the view
// (`now_s`, the caller's clock); a policy has no clock and no randomness.

#include "policies/api/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <utility>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace troupe::policy {

/// What a policy may know of one request.
struct request_view {
  std::uint64_t id = 0;
  std::uint64_t tenant = 0;
  std::int32_t priority = 0;          ///< the API's priority; larger is more important
  double arrival_s = 0;               ///< when it arrived, on the view's clock
  std::int32_t num_prompt_tokens = 0;
  std::int32_t num_output_tokens = 0; ///< generated so far
  std::int32_t max_tokens = 0;
  std::int32_t output_len_hint = -1;  ///< predicted output length; -1: none
  std::int32_t num_computed_tokens = 0;
  double weight = 1.0;                ///< > 0: its tenant's share (vtc: served tokens count 1/weight)
};

struct schedule_view {
  double now_s = 0;
  std::span<const request_view> waiting; ///< in arrival order
  std::span<const request_view> running; ///< in admission order
};

/// 0, 1, ..., n-1 over v.waiting: arrival order (FCFS).
inline auto arrival_order(const schedule_view& v) -> std::vector<std::size_t> {
  std::vector<std::size_t> order(v.waiting.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

/// Indices of `views` by ascending key(view), arrival order among equals;
/// each key computed once.
template <class Key>
auto order_by(std::span<const request_view> views, Key key) -> std::vector<std::size_t> {
  using K = decltype(key(views[0]));
  std::vector<std::pair<K, std::size_t>> keyed;
  keyed.reserve(views.size());
  for (std::size_t i = 0; i < views.size(); ++i) keyed.emplace_back(key(views[i]), i);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::size_t> order;
  order.reserve(keyed.size());
  for (const auto& [k, i] : keyed) order.push_back(i);
  return order;
}

class scheduling_policy {
public:
  virtual ~scheduling_policy() = default;
  virtual auto name() const -> std::string_view = 0;
  /// Indices into v.waiting, in the order to try admitting them this step.
  /// Requests left out wait (the mechanism stops at the first that does
  /// not fit, so the order is also a promise of fairness).
  virtual auto admission_order(const schedule_view& v) -> std::vector<std::size_t> = 0;
  /// The index into v.running (non-empty) of the request to preempt.
  virtual auto preemption_victim(const schedule_view& v) -> std::size_t = 0;
  /// After each step: the tokens a request was served (prompt tokens
  /// prefilled, output tokens decoded). For policies that account (VTC).
  virtual void on_served(const request_view& r, std::int32_t num_prefill_tokens, std::int32_t num_decode_tokens) {
    (void)r, (void)num_prefill_tokens, (void)num_decode_tokens;
  }
  /// Whether on_served() is wanted: the scheduler calls it for every chunk
  /// of every step only then. Asked once, at construction. Policies that
  /// keep no account say false (a simulated step is then a tenth cheaper).
  virtual auto wants_service_reports() const -> bool { return true; }
};

} // namespace troupe::policy
