#pragma once
// Runs one request start to finish on an executor: chunked prefill, then
// decode, streaming text. The `troupe generate` command and the engine tests
// use it; the server's scheduler (issue 4) replaces it for many requests.

#include "engine/executor.hpp"
#include "engine/tokenizer/output_processor.hpp"
#include "engine/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace troupe {

struct generation_stats {
  std::int64_t num_prompt_tokens = 0;
  std::int64_t num_generated_tokens = 0;
  double prefill_seconds = 0.0; ///< up to and including the first token
  double decode_seconds = 0.0;  ///< the remaining tokens
  finish_reason reason = finish_reason::none;
  std::vector<token_id> tokens; ///< every sampled token
};

class generator {
public:
  /// max_chunk_tokens: prompt tokens per prefill step (chunked prefill), >= 1
  /// (else std::invalid_argument).
  /// max_model_len: prompt + max_tokens may not exceed it.
  generator(executor& ex, const tokenizer& tok, std::vector<token_id> eos_ids,
            std::int32_t max_chunk_tokens, std::int64_t max_model_len);

  /// Throws std::invalid_argument with one line when the prompt is empty or
  /// holds an id outside the model's vocabulary, the params are invalid, or
  /// the request cannot fit the model or the KV cache. Returns the KV blocks
  /// the request needs. generate() runs it first; callers may run it earlier.
  auto check(std::span<const token_id> prompt, const sampling_params& params) const
      -> std::int64_t;

  /// Runs check(), then the request, streaming its text to on_text.
  auto generate(std::span<const token_id> prompt, const sampling_params& params,
                const std::function<void(std::string_view)>& on_text) -> generation_stats;

private:
  executor& ex_;
  const tokenizer& tok_;
  std::vector<token_id> eos_ids_;
  std::int32_t max_chunk_tokens_;
  std::int64_t max_model_len_;
  request_id next_id_ = 1;
};

} // namespace troupe
