#pragma once
// What sampling one position gives: the token and its logprobs. The scheduler
// carries it from the executor to the request's output.

#include "engine/core/types.hpp"

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

} // namespace troupe
