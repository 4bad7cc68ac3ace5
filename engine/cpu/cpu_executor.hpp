#pragma once
// The CPU backend behind the executor seam: the forward pass plus one
// sampler per request.

#include "engine/cpu/cpu_model.hpp"
#include "engine/executor.hpp"
#include "engine/request_tables.hpp"
#include "base/rng.hpp"
#include "engine/sampling/sampler.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

namespace troupe {

struct cpu_executor_options {
  std::int32_t block_size = 16;
  std::int32_t num_kv_blocks = 256;
  int num_threads = 0;   ///< 0: one per core
  std::uint64_t seed = 0; ///< draws the seeds of requests that bring none
  std::int32_t num_host_blocks = 0; ///< swap space in host memory, for preemption by swap
  /// Ids the samplers may pick: [0, n), the tokenizer's vocabulary (a model
  /// pads its rows past it); 0 = the model's whole vocabulary. At most vocab_size.
  std::int64_t num_sampled_ids = 0;
  kv_dtype kv_type = kv_dtype::f32; ///< how the KV cache stores keys and values
  /// Compiled grammars over the tokenizer's ids as bytes, for requests with
  /// a grammar, shared with the tokenizer pool that compiled them (null: a
  /// request with one is a bug in the caller, which checks).
  std::shared_ptr<grammar::grammar_cache> grammars = nullptr;
  /// A grammar's forced tokens come with the sampled one (request_sampler's jump_forward).
  bool jump_forward = false;
};

class cpu_executor final : public executor {
public:
  /// `weights` must outlive the executor.
  cpu_executor(const model_weights& weights, const cpu_executor_options& options);

  auto execute(const scheduler_output& step) -> step_result override;
  auto block_size() const -> std::int32_t override { return options_.block_size; }
  auto num_kv_blocks() const -> std::int32_t override { return options_.num_kv_blocks; }
  auto vocab_size() const -> std::int64_t override { return model_.config().vocab_size; }

private:
  /// A request asking for prompt logprobs, until its first token carries them.
  struct prompt_scores {
    std::vector<token_id> prompt;
    std::vector<sample_result> scores; ///< of prompt[1 .. scores.size()]
  };

  void swap(const scheduler_output& step);
  /// Scores the prompt tokens that chunk `c`'s rows (from logits row `row`) predict.
  void score_prompt(const scheduled_chunk& c, std::size_t row, prompt_scores& p, request_sampler& sampler);

  cpu_executor_options options_;
  cpu_model model_;
  std::unique_ptr<std::byte[]> host_; ///< num_host_blocks × the KV cache's block_bytes()
  rng seed_source_;
  std::unordered_map<request_id, request_sampler> samplers_;
  std::unordered_map<request_id, prompt_scores> scoring_;
  request_tables tables_;
  std::vector<cpu_model::chunk> chunks_;
  std::vector<float> logits_;
  std::vector<std::pair<std::size_t, request_sampler*>> to_sample_; ///< (logits row, sampler)
};

} // namespace troupe
