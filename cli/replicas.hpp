#pragma once
// What `troupe serve` and `troupe worker` both do with a model: its facts
// from the config (KV blocks, context, the executors' options), and a
// replica on a device of its own (the autoscaler's cold starts, a worker's
// replicas).

#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "actors/scheduler_actor.hpp"
#include "service/server_config.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/formats/gguf.hpp"
#include "engine/model/model_config.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/zero_executor.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <csignal>

#include <filesystem>
#include <memory>
#include <string>

namespace troupe::cli {

struct model_setup {
  std::filesystem::path dir;
  std::shared_ptr<const gguf::file> gguf; ///< dir opened, where it is a GGUF file (read once)
  std::string name; ///< what clients call it
  model_config mc;
  std::shared_ptr<const tokenizer> tok;
  std::vector<token_id> eos;
  kv_dtype kv = kv_dtype::f32;     ///< the KV cache's type (scheduler.kv_cache_dtype resolved)
  std::int64_t block_bytes = 0;    ///< kv_block_bytes
  std::int32_t num_blocks = 0;     ///< per device (kv_memory)
  std::int32_t max_model_len = 0;
  zero_executor_options zero;      ///< for engine.executor = "zero"; samples the tokenizer's ids only
  cpu_executor_options cpu;        ///< without swap space; samples the tokenizer's ids only
  /// A replica's scheduler options on a device of its own (share: every
  /// block, no swap, no step log, no router yet).
  replica_options replica;
};

/// The model of cfg's [model], served on the CPU or (cuda) a CUDA device.
/// Throws with one line for a config the model cannot serve, or a tokenizer
/// with more pieces than the model has rows (model_error).
auto prepare_model(const server_config& cfg, bool cuda = false) -> model_setup;
/// prepare_model() for the devices engine.devices names, as serve and a
/// worker start them: CUDA ones (the zero executor aside) must be the
/// tensor-parallel size, and the CUDA backend must support the model.
auto prepare_for_devices(const server_config& cfg) -> model_setup;

/// The local fleet cfg describes on m's KV blocks: the same for `serve` and
/// `sim --server-config`.
struct fleet_plan {
  bool cuda = false;              ///< engine.devices names CUDA ones (one tensor-parallel device)
  std::int32_t devices = 1;       ///< each with its own executor, KV cache and memory manager
  std::int32_t replicas = 1;      ///< on every device together
  std::int32_t share = 0;         ///< a replica's share of its device's KV blocks
  std::int32_t num_host_blocks = 0; ///< a device's swap space in blocks (preemption_mode "swap")
  bool autoscaled = false;
};

/// Throws the one line serve refuses a fleet with: swap space under a block
/// per replica, a watermark that leaves a replica no block, the autoscaler
/// on CUDA devices or a replica count outside its range.
auto plan_fleet(const server_config& cfg, const model_setup& m) -> fleet_plan;

/// m's weights, from its opened GGUF file or its directory.
auto load_model_weights(const model_setup& m) -> model_weights;

/// m's weights for a CPU executor: quantized as engine.weight_dtype says,
/// then placed in huge pages where engine.huge_pages says.
auto load_cpu_weights(const server_config& cfg, const model_setup& m) -> model_weights;

/// Throws one line naming the first model directory of cfg ([model], then
/// model.more) that is not there, and how to make one; `command` ("serve",
/// "worker") is the command that needs them.
void check_model_dirs(const server_config& cfg, const std::string& command);

/// The name clients use for a model: the configured one, else its dir's last component.
auto served_name(const std::string& configured, const std::filesystem::path& dir) -> std::string;

/// A replica's first lease: half of `share` blocks of the device's memory
/// manager (the rest it leases as it needs). Throws "KV lease failed: ...".
auto first_lease(caf::actor_system& sys, const memory_manager_actor& mm, std::int32_t share) -> std::vector<block_id>;

/// A replica with a device of its own (CPU or zero executor): the weights
/// loaded again, its executor, KV cache and memory manager (named `device`
/// in the metrics), and its scheduler reporting to `router`. Blocking.
auto start_own_replica(caf::actor_system& sys, const server_config& cfg, const model_setup& m, std::int32_t index,
                       router_actor router, server_metrics* metrics, server_status* status,
                       const std::string& device) -> started_replica;

/// SIGTERM and SIGINT blocked (for sigwait): call before any thread starts,
/// so that every thread inherits the mask. Returns the set.
auto block_stop_signals() -> sigset_t;

/// CAF's settings from [actors], the wire types, and the network layer when
/// replicas cross machines (plain BASP: the workers' gate does TLS and the
/// secret in front of it; `cfg`'s router.worker_tls_* are the gate's).
void configure_actors(caf::actor_system_config& caf_cfg, const server_config& cfg, bool network);

} // namespace troupe::cli
