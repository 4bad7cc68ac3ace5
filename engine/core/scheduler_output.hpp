#pragma once
// The seam between scheduling and execution (vLLM v1's SchedulerOutput and
// ModelRunnerOutput): one step is one plain value in, one plain value out.

#include "engine/sampling/sampler.hpp"
#include "engine/sampling/sampling_params.hpp"
#include "engine/types.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

/// A request the executor has not seen before; sent once, in its first step.
struct new_request_data {
  request_id id = 0;
  std::vector<token_id> prompt_tokens; ///< for the repetition penalty
  sampling_params sampling;
};

/// One sequence's share of a step: a chunk of prompt tokens or one decode token.
struct scheduled_chunk {
  request_id id = 0;
  std::vector<token_id> tokens;          ///< tokens to compute this step, >= 1
  std::int32_t num_computed_tokens = 0;  ///< position of tokens[0]
  /// Blocks appended to the request's block table (vLLM v1 sends block ids
  /// as a diff too: a decode step usually adds none). With reset_blocks the
  /// table is exactly these (a request's first step, or after preemption).
  /// The table then covers positions [0, num_computed + tokens).
  std::vector<block_id> new_blocks;
  bool reset_blocks = false;
  bool sample = false;                   ///< sample a token after the last one
};

struct scheduler_output {
  std::vector<new_request_data> new_requests;
  std::vector<scheduled_chunk> scheduled;
  std::vector<request_id> finished; ///< the executor forgets these (and their tables) after the step

  auto num_scheduled_tokens() const -> std::int64_t {
    std::int64_t n = 0;
    for (const auto& c : scheduled) n += static_cast<std::int64_t>(c.tokens.size());
    return n;
  }
};

struct sampled_token {
  request_id id = 0;
  sample_result result;
};

/// What one step produced: a token for each chunk that asked for one, in
/// the order the chunks were scheduled.
struct step_result {
  std::vector<sampled_token> sampled;
};

} // namespace troupe
