#pragma once
// Turns one row of logits into a token, per request, deterministically.

#include "engine/sampling/rng.hpp"
#include "engine/sampling/sampling_params.hpp"
#include "engine/types.hpp"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace troupe {

struct token_logprob {
  token_id token = -1;
  float logprob = 0.0f;
};

struct sample_result {
  token_id token = -1;
  float logprob = 0.0f;                    ///< of `token`, under the raw logits
  std::vector<token_logprob> top_logprobs; ///< params.logprobs entries, best first
};

/// One request's sampler: its parameters, its random stream and the counts the
/// penalties need. Not thread-safe; one per request.
class request_sampler {
public:
  /// `fallback_seed` is used when params.seed is unset (the caller draws it
  /// from its own seeded generator, so runs stay reproducible).
  request_sampler(sampling_params params, std::span<const token_id> prompt,
                  std::uint64_t fallback_seed);

  /// Samples from `logits` (vocab entries; overwritten as scratch) and records
  /// the token as generated. Logprobs are log_softmax of the logits as given,
  /// before penalties and temperature. O(vocab) plus O(k log k) for top-k/top-p.
  auto sample(std::span<float> logits) -> sample_result;

  auto params() const -> const sampling_params& { return params_; }
  auto num_generated() const -> std::int32_t { return num_generated_; }

private:
  sampling_params params_;
  rng rng_;
  std::unordered_map<token_id, std::int32_t> output_counts_;
  std::vector<token_id> prompt_tokens_; ///< sorted, unique: repetition penalty
  std::int32_t num_generated_ = 0;
  std::vector<std::int32_t> scratch_idx_;
};

} // namespace troupe
