#include "engine/core/scheduler_config.hpp"

namespace troupe {

auto limits_of(const scheduler_config& s, std::int32_t max_model_len, std::int32_t num_host_blocks)
    -> scheduler_limits {
  scheduler_limits l;
  l.max_num_seqs = s.max_num_seqs;
  l.max_num_batched_tokens = s.max_num_batched_tokens;
  l.max_model_len = max_model_len;
  l.max_waiting_requests = s.max_waiting_requests;
  l.max_waiting_tokens = s.max_waiting_tokens;
  l.max_input_tokens = s.max_input_tokens;
  l.max_output_tokens = s.max_output_tokens;
  l.preemption = s.preemption_mode == "swap" ? preemption_mode::swap : preemption_mode::recompute;
  l.num_host_blocks = num_host_blocks;
  l.long_prefill_token_threshold = s.long_prefill_token_threshold;
  l.max_num_partial_prefills = s.max_num_partial_prefills;
  l.prefill_chunk_cost = s.prefill_chunk_cost;
  return l;
}

auto kv_options_of(const scheduler_config& s) -> kv_cache_options {
  kv_cache_options o;
  o.block_size = s.block_size;
  o.watermark_blocks = s.watermark_blocks;
  o.enable_prefix_caching = s.enable_prefix_caching;
  return o;
}

} // namespace troupe
