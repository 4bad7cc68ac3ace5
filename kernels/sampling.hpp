#pragma once
// Sampling on the device (sampling.cu), one row of logits per request, with
// the CPU sampler's semantics (engine/sampling/sampler.hpp): repetition, then
// presence and frequency penalties; greedy below temperature 1e-5 (lowest id
// on ties); else temperature, top-k (exactly k, lower id first on equal
// logits), top-p over what top-k kept (the smallest best-first prefix holding
// top_p of its mass), min-p, and an inverse-CDF draw in id order over the
// kept tokens with a uniform number the host draws from the request's seeded
// stream. NaN logits count as impossible, +inf as the largest float.

#include "kernels/sampling_row.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace troupe::kernels {

struct sampling_params {
  float* logits = nullptr;       ///< [rows, row_stride] F32, overwritten (scratch)
  std::int64_t rows = 0, vocab = 0; ///< vocab: the ids sampled, [0, vocab), a prefix of each row
  const sampling_row* row_params = nullptr; ///< [rows]
  /// Per row, distinct tokens seen: id, and its count in the output (0: only
  /// in the prompt). Repetition applies to every entry, presence and
  /// frequency to those with a count.
  const std::int32_t* penalty_tokens = nullptr;
  const std::int32_t* penalty_counts = nullptr;
  float* raw = nullptr;          ///< [rows, row_stride] scratch: the logits as given
  std::int32_t* tokens = nullptr; ///< [rows] out
  float* logprobs = nullptr;     ///< [rows] out: the token's log_softmax of the raw logits
  /// Floats from one row of logits (and raw) to the next, >= vocab: the
  /// model's vocabulary when it pads past the tokenizer's; 0: vocab.
  std::int64_t row_stride = 0;
};

void sample(const sampling_params& p, cudaStream_t stream);

} // namespace troupe::kernels
