#pragma once
// The one place replicas are made, for `serve`'s fleet, the autoscaler's
// cold starts and a worker's replicas: a device kind's executors, and a
// replica's scheduler on a device (its first lease, its step log).

#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "actors/scheduler_actor.hpp"
#include "cli/replicas.hpp"
#include "engine/executor.hpp"
#include "service/server_config.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <vector>

namespace troupe::cli {

/// The executors of `count` devices of cfg's kind: zero executors, one CUDA
/// executor over every engine.devices entry (tensor parallel; count is 1),
/// or CPU executors sharing one load of the weights (quantized and placed
/// as engine.weight_dtype and engine.huge_pages say). Each executor holds
/// what it reads: the weights go with the last. `num_host_blocks`: a
/// device's swap space.
auto make_executors(const server_config& cfg, const model_setup& m, int count, std::int32_t num_host_blocks)
    -> std::vector<std::shared_ptr<executor>>;

/// A replica's scheduler on a device (its executor and memory manager):
/// its first lease (half of options.share blocks), and its step log where
/// engine.step_log is set (the path, and ".N" for replica N > 0).
/// Throws "KV lease failed: ..." or the step log's error.
auto start_replica(caf::actor_system& sys, const server_config& cfg, replica_options options,
                   const executor_actor& exec, const memory_manager_actor& mm, server_metrics* metrics,
                   server_status* status) -> scheduler_actor;

} // namespace troupe::cli
