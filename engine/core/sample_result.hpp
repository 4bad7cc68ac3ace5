#pragma once
// What sampling one position gives: the token and its logprobs. The scheduler
// carries it from the executor to the request's output.

#include "base/types.hpp"

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
  /// Jump-forward: the tokens a grammar forces after `token`, written
  /// without a model step (the scheduler appends them with it, and the next
  /// step computes them as one chunk). Without logprobs: none are asked for.
  std::vector<token_id> forced;
};

} // namespace troupe
