#pragma once
// Continuous batching over one executor (Orca, Yu et al., OSDI'22; vLLM v1):
// each step, running requests first (a decode token each, or their next
// prefill chunk), then waiting ones admitted first come, first served while
// the token budget, max_num_seqs and free KV blocks allow. When a running
// request needs a block and none is free, the most recently admitted one is
// preempted (its blocks freed; it is recomputed later). Deterministic: no
// clock, no randomness. Issue 4 turns the fixed FCFS order into policies.

#include "engine/core/block_pool.hpp"
#include "engine/core/request.hpp"
#include "engine/core/scheduler_output.hpp"
#include "engine/output_processor.hpp"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace troupe {

struct scheduler_limits {
  std::int32_t max_num_seqs = 256;           ///< running requests at once, >= 1
  std::int32_t max_num_batched_tokens = 2048; ///< tokens per step, >= 1
  std::int32_t block_size = 16;              ///< tokens per KV block
  std::int32_t max_model_len = 2048;         ///< prompt + output, at most
};

/// What one step did for one request: its new tokens, and whether it ended.
struct request_update {
  request_id id = 0;
  std::vector<sample_result> tokens; ///< zero or one per step
  finish_reason finished = finish_reason::none;
};

class batch_scheduler {
public:
  /// `blocks`: the KV blocks this scheduler may use. eos_ids end a request
  /// unless it sets ignore_eos.
  batch_scheduler(const scheduler_limits& limits, block_pool blocks, std::vector<token_id> eos_ids);

  /// Why `r` can never run here ("" when it can): prompt + max_tokens over
  /// max_model_len, or more blocks than the whole pool holds.
  [[nodiscard]] auto check(const request& r) const -> std::string;
  /// Queues a request (state waiting) that passed check(); ids must be new.
  void add(request r);
  /// Ends a waiting or running request now and frees its blocks; false if
  /// unknown (or already finished). The executor hears of it next step.
  auto abort(request_id id) -> bool;

  /// The next step; empty (no scheduled chunks) when nothing can run. Each
  /// call must be followed by update() with the executor's result before the
  /// next schedule().
  auto schedule() -> scheduler_output;
  /// Applies a step's result: advances computed tokens, appends samples,
  /// finishes requests on EOS / stop token ids / max_tokens / max_model_len.
  auto update(const scheduler_output& step, const step_result& result) -> std::vector<request_update>;

  auto num_waiting() const -> std::int64_t { return static_cast<std::int64_t>(waiting_.size()); }
  auto num_running() const -> std::int64_t { return static_cast<std::int64_t>(running_.size()); }
  auto has_work() const -> bool { return !waiting_.empty() || !running_.empty(); }
  auto blocks() const -> const block_pool& { return blocks_; }
  auto num_preemptions() const -> std::int64_t { return num_preemptions_; }
  auto limits() const -> const scheduler_limits& { return limits_; }

private:
  auto find(request_id id) -> request*;
  auto grow(request& r, std::int32_t num_tokens) -> bool;
  void preempt(request& r);
  void release(request& r);
  auto chunk_of(request& r, std::int32_t num_new) -> scheduled_chunk;

  scheduler_limits limits_;
  block_pool blocks_;
  std::vector<token_id> eos_ids_;
  std::unordered_map<request_id, std::unique_ptr<request>> requests_;
  std::deque<request*> waiting_;
  std::vector<request*> running_;   ///< in admission order
  std::vector<request_id> finished_; ///< for the next step's executor
  std::int64_t num_preemptions_ = 0;
};

} // namespace troupe
