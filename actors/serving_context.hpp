#pragma once
// What every request's sink and the gateway share for the server's life:
// the model's facts, the actor handles, the metrics and a few counters.

#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "engine/sampling/sampling_params.hpp"
#include "engine/tokenizer/tokenizer.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

struct serving_context {
  std::shared_ptr<const tokenizer> tok;
  std::string model_name;    ///< what clients pass as "model"
  std::string model_version; ///< the x-model-version header
  std::int32_t max_model_len = 0;
  std::vector<token_id> eos_ids;
  sampling_params defaults;  ///< the model's generation_config
  std::vector<tokenizer_actor> tokenizers;
  std::vector<scheduler_actor> schedulers; ///< one per replica
  router_actor router;                     ///< picks each request's replica
  /// For prefix-affine routing (else empty): each device's memory manager,
  /// and each replica's device.
  std::vector<memory_manager_actor> memories;
  std::vector<std::size_t> replica_device;
  std::int32_t block_size = 16;
  std::int32_t max_retries = 2; ///< on other replicas, for a request whose replica failed before its first token
  /// Replicas in the router's rotation (kept by the router).
  std::shared_ptr<std::atomic<std::int32_t>> num_ready = std::make_shared<std::atomic<std::int32_t>>(0);
  server_metrics* metrics = nullptr;

  std::atomic<std::uint64_t> next_tokenizer{0};
  std::atomic<request_id> next_request{1};

  /// Tokenizers in turn (replicas: the router).
  auto pick_tokenizer() -> const tokenizer_actor& {
    return tokenizers[next_tokenizer.fetch_add(1, std::memory_order_relaxed) % tokenizers.size()];
  }
};

/// The server's liveness facts, read by /health and the drain logic.
struct server_status {
  std::atomic<bool> ready{false};    ///< the model is loaded and actors run
  std::atomic<bool> draining{false}; ///< SIGTERM received: no new requests
  std::atomic<std::int64_t> num_live_requests{0};  ///< sinks alive
  std::atomic<std::int64_t> num_queued{0};          ///< waiting + running, all replicas
  std::atomic<std::int64_t> last_progress_ns{0};    ///< steady clock of the last finished step
};

} // namespace troupe
