#pragma once
// The seam between scheduling and execution (vLLM v1's SchedulerOutput and
// ModelRunnerOutput): one step is one plain value in, one plain value out.

#include "engine/core/sample_result.hpp"
#include "engine/core/sampling_params.hpp"
#include "base/types.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

/// A request the executor has not seen before; sent once, in its first step.
struct new_request_data {
  request_id id = 0;
  std::vector<token_id> prompt_tokens; ///< for the repetition penalty
  sampling_params sampling;
};

/// One sequence's share of a step: a chunk of prompt tokens or one decode
/// token. Its tokens and new blocks lie in the step's flattened token_ids
/// and block_ids (two allocations per step, not two per sequence):
/// scheduler_output::tokens_of() and new_blocks_of().
struct scheduled_chunk {
  request_id id = 0;
  std::int32_t first_token = 0;          ///< index of its first token in token_ids
  std::int32_t num_tokens = 0;           ///< tokens to compute this step, >= 1
  std::int32_t num_computed_tokens = 0;  ///< position of its first token
  /// Blocks appended to the request's block table (vLLM v1 sends block ids
  /// as a diff too: a decode step usually adds none), block_ids[first_block,
  /// + num_new_blocks). With reset_blocks the table is exactly these (a
  /// request's first step, or after preemption). The table then covers
  /// positions [0, num_computed + tokens).
  std::int32_t first_block = 0;
  std::int32_t num_new_blocks = 0;
  bool reset_blocks = false;
  bool sample = false;                   ///< sample a token after the last one
};

/// One KV block copied between the device's cache and host swap space.
struct block_copy {
  block_id from = 0;
  block_id to = 0;
};

struct scheduler_output {
  std::vector<new_request_data> new_requests;
  /// Before the step computes anything: device blocks copied out to host
  /// blocks (requests preempted by swap; the device blocks may be rewritten
  /// by this very step), then host blocks copied back into device blocks
  /// (swapped requests readmitted). A step never does both.
  std::vector<block_copy> swap_out;
  std::vector<block_copy> swap_in;
  std::vector<scheduled_chunk> scheduled;
  std::vector<token_id> token_ids;  ///< every chunk's tokens, end to end (the flattened batch)
  std::vector<block_id> block_ids;  ///< every chunk's new blocks, end to end
  std::vector<request_id> finished; ///< the executor forgets these (and their tables) after the step

  auto tokens_of(const scheduled_chunk& c) const -> std::span<const token_id> {
    return std::span(token_ids).subspan(static_cast<std::size_t>(c.first_token), static_cast<std::size_t>(c.num_tokens));
  }
  auto new_blocks_of(const scheduled_chunk& c) const -> std::span<const block_id> {
    return std::span(block_ids).subspan(static_cast<std::size_t>(c.first_block), static_cast<std::size_t>(c.num_new_blocks));
  }
  /// Appends a chunk computing `tokens` from position num_computed_tokens,
  /// its table extended by `new_blocks` (or, with reset_blocks, exactly them).
  auto add_chunk(request_id id, std::span<const token_id> tokens, std::int32_t num_computed_tokens,
                 std::span<const block_id> new_blocks = {}, bool reset_blocks = false) -> scheduled_chunk& {
    auto& c = scheduled.emplace_back();
    c.id = id;
    c.first_token = static_cast<std::int32_t>(token_ids.size());
    c.num_tokens = static_cast<std::int32_t>(tokens.size());
    c.num_computed_tokens = num_computed_tokens;
    token_ids.insert(token_ids.end(), tokens.begin(), tokens.end());
    c.first_block = static_cast<std::int32_t>(block_ids.size());
    c.num_new_blocks = static_cast<std::int32_t>(new_blocks.size());
    c.reset_blocks = reset_blocks;
    block_ids.insert(block_ids.end(), new_blocks.begin(), new_blocks.end());
    return c;
  }
  /// Empties it, keeping its buffers' capacity (for reuse step after step).
  void clear() {
    new_requests.clear();
    swap_out.clear();
    swap_in.clear();
    scheduled.clear();
    token_ids.clear();
    block_ids.clear();
    finished.clear();
  }
  auto num_scheduled_tokens() const -> std::int64_t { return static_cast<std::int64_t>(token_ids.size()); }
  /// Nothing for the executor to do (no chunk, no copy, nobody to forget).
  auto empty() const -> bool { return scheduled.empty() && finished.empty() && swap_out.empty() && swap_in.empty(); }
};

struct sampled_token {
  request_id id = 0;
  sample_result result;
  /// With its first token, for a request asking for prompt_logprobs: its
  /// prompt tokens' scores from the second on (the first has no context).
  std::vector<sample_result> prompt_logprobs;
};

/// What one step produced: a token for each chunk that asked for one, in
/// the order the chunks were scheduled.
struct step_result {
  std::vector<sampled_token> sampled;
};

} // namespace troupe
