#pragma once
// The plain values actors send each other (besides the engine's own
// scheduler_output / step_result / request_update).

#include "actors/http/http_server.hpp"
#include "engine/core/request.hpp"
#include "engine/core/scheduler_output.hpp"
#include "service/request/request_messages.hpp"

#include <caf/actor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// One step, shared between the scheduler (which applies its result) and
/// the executor (which runs it): sent by pointer, never copied.
using step_ptr = std::shared_ptr<const scheduler_output>;

/// Token messages on their way from a scheduler to one client: the
/// scheduler holds back its next step while too many are (backpressure from
/// the serving path, not from slow clients: a count drops when the text
/// reaches the connection, not the client).
using delivery_count = http::exchange::delivery_count;

/// Where a dispatch went: the replica's index and scheduler (a
/// scheduler_actor; -1 and none when no replica was ready), and, from the
/// scheduler (admitted_atom), its admission and whether the replica failed
/// it before admitting it (out of rotation, or gone).
struct placement {
  admission answer;
  std::int32_t replica = -1;
  caf::actor scheduler;
  bool failed = false;
};

/// One replica as the router sees it (for the autoscaler and /admin).
struct replica_snapshot {
  bool ready = false, alive = false, draining = false, healthy = false;
  std::int64_t running = 0, waiting = 0, in_flight = 0;
  double kv_use = 0, queue_age_s = 0;
};
using fleet_snapshot = std::vector<replica_snapshot>;

/// A replica the autoscaler had started (actors/autoscaler_actor.hpp): its
/// scheduler (a scheduler_actor), the actors to stop when it is retired, or
/// why it could not start.
struct started_replica {
  std::int32_t index = -1;
  caf::actor scheduler;
  std::vector<caf::actor> actors;
  std::string error;
};

} // namespace troupe
