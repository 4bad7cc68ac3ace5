#pragma once
// The simulator's side of the autoscaled fleet: the lifecycle itself is the
// server's (engine/core/fleet_lifecycle), driven on the simulator's clock.
// This shell adds what only the simulator has: cold starts that end
// cold_start_s after they begin, the decision window's measurements (exact
// TTFT ranks, tokens computed), and the replica-seconds. Without an
// autoscaler every replica serves throughout.

#include "engine/core/fleet_lifecycle.hpp"
#include "sim/scenario.hpp"
#include "sim/simulator.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace troupe::sim {

class autoscaled_fleet {
public:
  /// What the autoscaler reads of a replica.
  struct replica_load {
    std::int64_t running = 0, waiting = 0;
    double oldest_arrival = INFINITY; ///< the oldest waiting request's arrival
    double kv_use = 0;
    bool stepping = false;            ///< a step is under way
  };
  using probe = std::function<replica_load(std::size_t)>;

  /// `out` gets the replica-seconds, the decisions and each replica's loaded time.
  autoscaled_fleet(const autoscaler_spec& as, std::size_t replicas, run_result& out);

  auto enabled() const -> bool { return lifecycle_.has_value(); }
  auto serving(std::size_t i) const -> bool { return !enabled() || lifecycle_->state(i) == replica_state::serving; }
  auto state(std::size_t i) const -> replica_state {
    return enabled() ? lifecycle_->state(i) : replica_state::serving;
  }
  /// When the next decision is due (INFINITY without an autoscaler).
  auto next_tick() const -> double { return next_tick_; }
  /// The replica whose cold start ends first, and when (INFINITY: none).
  auto next_ready() const -> std::pair<double, std::size_t>;

  /// The decision window's inputs: a first token's TTFT, tokens computed.
  void note_first_token(double ttft) { window_ttft_.push_back(ttft); }
  void note_tokens(double n) { window_tokens_ += n; }

  /// The decision due at next_tick(); `stopped` gets the replicas it shut
  /// down (their caches are lost). Returns it.
  auto tick(const probe& load, std::vector<std::size_t>& stopped) -> fleet_decision;
  /// Replica i has loaded at `now`: it serves, or joins the warm pool.
  void ready(std::size_t i, double now);
  /// Integrates the replica-seconds up to t.
  void advance(double t);

private:
  void act(const std::vector<fleet_action>& actions, double now, std::vector<std::size_t>& stopped);
  auto loaded_count() const -> std::size_t;

  autoscaler_spec as_;
  run_result& out_;
  std::optional<fleet_lifecycle> lifecycle_;
  std::vector<double> ready_at_;
  double seconds_at_ = 0;           ///< replica-seconds are integrated up to here
  std::vector<double> window_ttft_; ///< TTFTs of first tokens since the last decision
  double window_tokens_ = 0;        ///< tokens computed since the last decision
  double next_tick_ = INFINITY;
};

} // namespace troupe::sim
