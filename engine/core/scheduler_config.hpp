#pragma once
// The [scheduler] keys that configure a replica's batch scheduler and KV
// cache, as the server's config file and the simulator's [[replicas]] tables
// both name them. One mapping, limits_of(), turns them into the scheduler's
// limits on both sides, so a key means the same thing in each. (How the KV
// memory is sized, kv_memory / kv_cache_dtype / swap_space on the server and
// kv_blocks / kv_memory / host_blocks in the simulator, stays with each.)

#include "engine/core/batch_scheduler.hpp"
#include "engine/core/kv_cache_manager.hpp"

#include <cstdint>
#include <string>

namespace troupe {

/// The server's defaults; the simulator's replica_spec sets its own where
/// they differ (docs/simulator.md).
struct scheduler_config {
  std::int32_t max_num_seqs = 256;               ///< >= 1
  std::int32_t max_num_batched_tokens = 2048;    ///< >= 1 (may be below block_size)
  std::int32_t long_prefill_token_threshold = 0; ///< >= 0: a request's prefill tokens per step, at most (0: the budget)
  std::int32_t max_num_partial_prefills = 0;     ///< >= 0: prefills spanning steps running at once (0: no limit)
  double prefill_chunk_cost = 1.0;               ///< >= 0: a decoding step's prefill, in decode steps (0: no pacing)
  std::int32_t block_size = 16;                  ///< [1, 1024] tokens per KV block
  std::int32_t max_waiting_requests = 4096;      ///< >= 1; beyond it requests get 429
  std::int64_t max_waiting_tokens = 1 << 22;     ///< >= 1
  std::int32_t max_model_len = 0;                ///< >= 0; 0: the model's max_position_embeddings (server)
  std::int32_t max_input_tokens = 0;             ///< >= 0 per request; 0: max_model_len
  std::int32_t max_output_tokens = 0;            ///< >= 0 per request; 0: up to the context
  std::string policy = "fcfs";                   ///< a scheduling policy's name, or a plug-in's path
  std::string eviction = "lru";                  ///< an eviction policy's name, or a plug-in's path
  bool enable_prefix_caching = true;
  std::int32_t watermark_blocks = 0;             ///< >= 0 KV blocks admissions leave free
  std::string preemption_mode = "recompute";     ///< "recompute" | "swap" (KV to host memory while preempted)
  friend auto operator==(const scheduler_config&, const scheduler_config&) -> bool = default;
};

/// The scheduler's limits: `max_model_len` is the context length resolved
/// (the key, or the model's where the key is 0), `num_host_blocks` the swap
/// space of this scheduler in blocks.
auto limits_of(const scheduler_config& s, std::int32_t max_model_len, std::int32_t num_host_blocks = 0)
    -> scheduler_limits;

/// The KV cache manager's options (the sliding window is the model's, set
/// by the caller).
auto kv_options_of(const scheduler_config& s) -> kv_cache_options;

} // namespace troupe
