#pragma once
// One replica's logic apart from its messages: its batch scheduler over a
// lease of its device's blocks (engine/core/leased_blocks), when to lease
// more and when to hand a surplus back, whether a step may run while its
// tokens are still on their way (backpressure), and when the router needs
// a load report. Deterministic: time comes in as arguments. The scheduler
// actor (actors/scheduler_actor) carries out what it decides.

#include "engine/core/batch_scheduler.hpp"
#include "engine/core/kv_cache_manager.hpp"
#include "engine/core/leased_blocks.hpp"
#include "engine/core/router_core.hpp"
#include "policies/api/scheduling.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace troupe {

struct replica_core_options {
  scheduler_limits limits;
  kv_cache_options kv;
  std::string scheduling = "fcfs"; ///< a policy name (policies/registry.hpp)
  std::int64_t share = 0;          ///< the device blocks this replica may lease, at most (> 0)
  std::vector<token_id> eos_ids;
};

class replica_core {
public:
  /// `lease`: its first blocks from the device's memory manager.
  replica_core(const replica_core_options& options, std::span<const block_id> lease);

  auto scheduler() -> batch_scheduler& { return *core_; }
  auto scheduler() const -> const batch_scheduler& { return *core_; }
  auto lease() const -> const leased_blocks& { return *lease_; }

  /// What goes to the memory manager after a step or an abort: its
  /// publishes and releases, an idle surplus handed back (shrunk_to: the
  /// free blocks kept, -1 when none went), and whether to lease more now.
  struct lease_traffic {
    std::vector<block_op> ops;
    std::int64_t shrunk_to = -1;
    bool refill = false;
  };
  auto after_change() -> lease_traffic;
  /// The blocks a refill asks for: a batch ahead of need, or while starved
  /// as many as the share allows; never past the share. 0: none (none is
  /// asked for while one is in flight).
  auto begin_refill() -> std::int32_t;
  /// A refill's blocks. True: it came back empty while starved, so ask
  /// again shortly (releases elsewhere may free blocks): the replica never
  /// waits for an event that will not come.
  auto refilled(std::span<const block_id> blocks) -> bool;
  void refill_failed() { refilling_ = false; }
  /// A step found work it could not run (blocks are short), or not.
  void set_starved(bool starved) { starved_ = starved; }
  auto starved() const -> bool { return starved_; }

  /// Whether the next step may run while `backlog` token messages are on
  /// their way to the clients' connections: up to two steps' worth (16 +
  /// 2 per running request). Measured on the zero-cost executor with 1000
  /// streams: one step in lockstep gave 53k tokens/s, two 116k, unbounded
  /// 260k with gaps twice as long at p99.
  auto may_step(std::int64_t backlog) const -> bool;

  /// Whether the router needs `r` now: the counts it acts on (running,
  /// waiting, submissions) changed, or `report_interval_s` passed since the
  /// last report. A report sent is remembered.
  auto report_due(const replica_report& r, double now_s) -> bool;
  static constexpr double report_interval_s = 0.005;

  auto low_water() const -> std::int64_t { return low_water_; }

private:
  // Built in this order, destroyed in reverse: each refers to those above.
  std::unique_ptr<policy::scheduling_policy> policy_;
  std::unique_ptr<leased_blocks> lease_;
  std::unique_ptr<kv_cache_manager> kv_;
  std::unique_ptr<batch_scheduler> core_;
  std::int64_t low_water_ = 0;  ///< free leased blocks below which to refill
  std::int32_t refill_batch_ = 0;
  bool refilling_ = false;      ///< a lease request is in flight
  bool starved_ = false;
  replica_report last_report_;
  double last_report_s_ = -1;
};

} // namespace troupe
