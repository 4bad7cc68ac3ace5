#pragma once
// One request as the scheduler core tracks it.

#include "engine/sampling/sampling_params.hpp"
#include "engine/types.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

///   waiting ──admit──▶ running ──last token / abort──▶ finished
///      ▲                  │
///      └────preempt───────┘   (its blocks freed; recomputed on readmission)
enum class request_state : std::uint8_t { waiting, running, finished };

struct request {
  request_id id = 0;
  std::vector<token_id> prompt;  ///< non-empty
  sampling_params sampling;      ///< max_tokens already resolved and valid
  std::vector<token_id> output;  ///< sampled so far
  std::int32_t num_computed_tokens = 0; ///< of prompt ++ output, in the KV cache
  std::vector<block_id> blocks;  ///< its block table
  request_state state = request_state::waiting;
  bool known_to_executor = false; ///< sent once as new_request_data
  std::int32_t num_preemptions = 0;

  auto num_tokens() const -> std::int32_t {
    return static_cast<std::int32_t>(prompt.size() + output.size());
  }
  /// Token i of prompt ++ output.
  auto token(std::int32_t i) const -> token_id {
    const auto p = static_cast<std::int32_t>(prompt.size());
    return i < p ? prompt[static_cast<std::size_t>(i)] : output[static_cast<std::size_t>(i - p)];
  }
};

} // namespace troupe
