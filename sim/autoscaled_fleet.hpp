#pragma once
// The simulator's autoscaler: each replica's state (off, starting, serving,
// draining, warm), a decision by the autoscaling policy every interval, cold
// starts that serve only once loaded, a warm pool, and scale-in one drained
// replica per delay. The same policies as the server's autoscaler actor; the
// clock is the simulator's. Without an autoscaler every replica serves
// throughout.

#include "policies/api/autoscaling.hpp"
#include "sim/scenario.hpp"
#include "sim/simulator.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
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

  auto enabled() const -> bool { return scaler_ != nullptr; }
  auto serving(std::size_t i) const -> bool { return states_[i] == state::serving; }
  /// When the next decision is due (INFINITY without an autoscaler).
  auto next_tick() const -> double { return next_tick_; }
  /// The replica whose cold start ends first, and when (INFINITY: none).
  auto next_ready() const -> std::pair<double, std::size_t>;

  /// The decision window's inputs: a first token's TTFT, tokens computed.
  void note_first_token(double ttft) { window_ttft_.push_back(ttft); }
  void note_tokens(double n) { window_tokens_ += n; }

  /// The decision due at next_tick(); `stopped` gets the replicas it shut
  /// down (their caches are lost).
  void tick(const probe& load, std::vector<std::size_t>& stopped);
  /// Replica i has loaded at `now`: it serves, or joins the warm pool.
  void ready(std::size_t i, double now);
  /// Drained replicas with nothing left stop, or rejoin the warm pool.
  void retire_idle(double now, const probe& load, std::vector<std::size_t>& stopped);
  /// Integrates the replica-seconds up to t.
  void advance(double t);

private:
  enum class state : std::uint8_t { off, starting, serving, draining, warm };
  auto count(state s) const -> std::int64_t;
  auto pooled() const -> std::int64_t; ///< warm, or starting for the pool
  void start(std::size_t i, double now, bool for_pool);

  autoscaler_spec as_;
  run_result& out_;
  std::unique_ptr<policy::autoscaling_policy> scaler_;
  std::vector<state> states_;
  std::vector<double> ready_at_;
  std::vector<bool> to_warm_;      ///< starting to refill the warm pool
  double seconds_at_ = 0;          ///< replica-seconds are integrated up to here
  std::vector<double> window_ttft_; ///< TTFTs of first tokens since the last decision
  double window_tokens_ = 0;       ///< tokens computed since the last decision
  double next_tick_ = INFINITY;
  double below_since_ = -1;        ///< desired has been under the fleet since then; -1: it is not
};

} // namespace troupe::sim
