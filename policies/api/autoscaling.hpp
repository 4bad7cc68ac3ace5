#pragma once
// The autoscaling policy kind: how many replicas a model should have, from
// the fleet's load reports. The policy only proposes a count within [min,
// max] and says why; the autoscaler (the simulator's, and the server's
// actor, actors/autoscaler_actor) starts replicas at once (they take traffic
// once loaded) and retires them slowly, draining. Plain C++: time comes in
// the view, no randomness.

#include "policies/api/abi.hpp"

#include <cstdint>
#include <string_view>

namespace troupe::policy {

/// The fleet of one model, aggregated over its replicas (recent windows:
/// the autoscaler's interval).
struct fleet_view {
  double now = 0.0;
  std::int32_t serving = 0;   ///< ready replicas taking traffic
  std::int32_t starting = 0;  ///< replicas loading (cold start)
  std::int32_t min_replicas = 1, max_replicas = 1;
  std::int64_t queue_depth = 0;   ///< requests waiting, all replicas
  double queue_age_s = 0.0;       ///< the oldest waiting request's wait
  std::int64_t active_seqs = 0;   ///< requests running
  double ttft_p95_s = 0.0;        ///< of first tokens in the window (0: none)
  double tpot_p95_s = 0.0;
  double kv_use = 0.0;            ///< mean over serving replicas, [0, 1]
  double tokens_per_s = 0.0;      ///< prompt + generated tokens computed per second, whole fleet
};

struct scale_decision {
  std::int32_t desired = 1;       ///< within [min_replicas, max_replicas]
  std::string_view reason;        ///< a short static phrase, for the log and the metric label
};

class autoscaling_policy {
public:
  virtual ~autoscaling_policy() = default;
  virtual auto name() const -> std::string_view = 0;
  virtual auto decide(const fleet_view& v) -> scale_decision = 0;
};

} // namespace troupe::policy
