#pragma once
// The autoscaled fleet's replica lifecycle, as plain C++: each replica slot's
// state (off, starting, serving, warm, draining), the autoscaling policy's
// decision every interval, and what follows from it. Time and the replicas'
// loads come in as arguments; what to do comes out as actions. The server's
// autoscaler actor and the simulator both drive this one core, so the
// simulator predicts the server's autoscaling.
//
// The rules, the same on both sides (docs/configuration.md, [autoscaler]):
// - Scale-out, at once, to `desired` replicas serving or starting for the
//   rotation: first draining replicas (still loaded, their caches warm: they
//   simply stay), then the warm pool, then a replica starting for the pool is
//   re-targeted to the rotation, then cold starts in the lowest free slots.
// - Scale-in, one replica per scale_in_delay_s: only once `desired` has been
//   below the replicas serving or starting for that long without a break (a
//   change either way restarts the wait, as Kubernetes' stabilization
//   window), and never below min_replicas. The victim is the serving replica
//   with the least work (running + waiting + in flight), the highest index
//   among equals (the last started). It drains: no new requests, its own
//   finish.
// - At each later decision a draining replica with nothing left retires:
//   parked in the warm pool while the pool is short, else stopped. The initial replicas
//   (which the fleet did not start) are never stopped: they park. A replica
//   the fleet starts in a lost initial replica's slot is the fleet's own.
// - The warm pool refills by cold starts at start-up and after each
//   decision, counting the replicas already starting for it.

#include "policies/api/autoscaling.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

enum class replica_state : std::uint8_t { off, starting, serving, warm, draining };

auto replica_state_name(replica_state s) -> std::string_view;

/// The [autoscaler] keys, as the server's config and the simulator's
/// scenarios name them (the simulator's autoscaler_spec adds its cold start).
struct autoscaler_config {
  std::string policy = "none";   ///< "none" (a fixed fleet), or an autoscaling policy's name
  double target = 0;             ///< >= 0: the policy's target (0: its default)
  std::int32_t min_replicas = 1; ///< >= 1
  std::int32_t max_replicas = 4; ///< >= min_replicas
  double interval_s = 5.0;       ///< > 0: a decision this often
  double scale_in_delay_s = 60.0; ///< >= 0: desired below the fleet this long before each scale-in
  std::int32_t warm_pool = 0;    ///< >= 0 loaded idle replicas kept for bursts
  auto enabled() const -> bool { return policy != "none"; }
  friend auto operator==(const autoscaler_config&, const autoscaler_config&) -> bool = default;
};

/// The slots an autoscaled fleet needs: room for max_replicas serving, as
/// many draining or warm beside them, and the pool.
constexpr auto fleet_slots(std::int32_t initial, std::int32_t max_replicas, std::int32_t warm_pool) -> std::int32_t {
  const auto need = 2 * std::int64_t{max_replicas} + warm_pool; // (the readers bound max_replicas)
  return static_cast<std::int32_t>(initial > need ? initial : need);
}

struct fleet_options {
  std::int32_t min_replicas = 1, max_replicas = 1;
  double scale_in_delay_s = 60;
  std::int32_t warm_pool = 0; ///< loaded idle replicas kept out of rotation, for bursts
  std::int32_t initial = 1;   ///< replicas 0..initial-1 serve from the start (never stopped)
  std::size_t slots = 1;      ///< replica indices are below this
};

/// What the fleet reads of one replica at a decision (of the serving and
/// draining ones; the others' are not read).
struct replica_load {
  std::int64_t running = 0, waiting = 0, in_flight = 0;
  double queue_age_s = 0; ///< its oldest waiting request's wait
  double kv_use = 0;      ///< [0, 1]
  bool idle = false;      ///< nothing running, waiting, on its way or being computed: a draining one may retire
};

/// What no replica reports alone: the window since the last decision.
struct fleet_window {
  double ttft_p95_s = 0, tpot_p95_s = 0;
  double tokens_per_s = 0;
};

struct fleet_action {
  enum class kind : std::uint8_t {
    start, ///< cold-start replica `replica` (for the warm pool where to_pool)
    serve, ///< a warm or draining replica back into rotation
    drain, ///< out of rotation; its requests finish
    park,  ///< drained, kept loaded in the warm pool (still out of rotation)
    stop,  ///< drained and stopped: unload it, its caches go
  };
  kind what = kind::start;
  std::size_t replica = 0;
  bool to_pool = false;
  friend auto operator==(const fleet_action&, const fleet_action&) -> bool = default;
};

struct fleet_decision {
  policy::fleet_view view;           ///< what the policy saw
  std::int32_t desired = 0;          ///< its answer, within [min_replicas, max_replicas]
  std::string_view reason;           ///< its reason (static text)
  std::vector<fleet_action> actions; ///< in the order taken
  bool out_of_slots = false;         ///< a cold start was wanted but every slot is in use
};

class fleet_lifecycle {
public:
  fleet_lifecycle(std::unique_ptr<policy::autoscaling_policy> policy, const fleet_options& options);

  /// The warm pool's cold starts, at start-up.
  auto start() -> std::vector<fleet_action>;
  /// The decision at `now`: `loads[i]` is slot i's (slots past the span read
  /// as empty). The actions are already applied to the states.
  auto decide(double now, std::span<const replica_load> loads, const fleet_window& window) -> fleet_decision;
  /// Replica i has loaded: it serves, or waits warm when it started for the
  /// pool. Returns its new state.
  auto loaded(std::size_t i) -> replica_state;
  /// Replica i failed to start, or died: its slot is free.
  void lost(std::size_t i);

  auto state(std::size_t i) const -> replica_state { return slots_[i].state; }
  auto count(replica_state s) const -> std::int32_t;
  /// Slots used so far: every slot at or past it has always been off.
  auto slots_used() const -> std::size_t { return used_; }
  auto policy() const -> const policy::autoscaling_policy& { return *policy_; }
  auto decisions() const -> std::int64_t { return decisions_; }
  auto scale_outs() const -> std::int64_t { return outs_; }
  auto scale_ins() const -> std::int64_t { return ins_; }

private:
  struct slot {
    replica_state state = replica_state::off;
    bool to_pool = false; ///< starting: joins the warm pool rather than the rotation
    bool ours = false;    ///< the fleet started it (else an initial replica: never stopped)
  };
  /// Warm, or starting for the pool.
  auto pooled() const -> std::int32_t;
  /// A cold start in the lowest free slot; false when none is free.
  auto cold_start(bool to_pool, std::vector<fleet_action>& out) -> bool;
  /// What the policy sees at `now`.
  auto observe(double now, std::span<const replica_load> loads, const fleet_window& window) const -> policy::fleet_view;
  /// Scale-out to d.desired from `have`: draining, warm, pool starts, then cold starts.
  void scale_out(std::int32_t have, fleet_decision& d);
  /// Scale-in once desired has been below the fleet long enough; the slot drained, else slots_.size().
  auto scale_in(double now, std::span<const replica_load> loads, fleet_decision& d) -> std::size_t;
  /// The serving replica to drain; slots_.size() when none serves.
  auto scale_in_victim(std::span<const replica_load> loads) const -> std::size_t;
  /// Drained replicas with nothing left, but `drained_now`: parked or stopped.
  void retire_drained(std::span<const replica_load> loads, std::size_t drained_now, std::vector<fleet_action>& out);
  /// The warm pool refilled by cold starts; d.out_of_slots when a slot is short.
  void refill_pool(fleet_decision& d);

  std::unique_ptr<policy::autoscaling_policy> policy_;
  fleet_options options_;
  std::vector<slot> slots_;
  std::size_t used_ = 0;
  double below_since_ = -1; ///< desired has been below the fleet since then; -1: it is not
  std::int64_t decisions_ = 0, outs_ = 0, ins_ = 0;
};

} // namespace troupe
