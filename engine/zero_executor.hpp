#pragma once
// An executor that runs no model: each sampled token comes back at once (or
// after a fixed simulated step time). It measures what serving costs around
// the model: actors, HTTP, SSE framing, detokenization.

#include "engine/executor.hpp"
#include "engine/grammar/grammar_matcher.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace troupe {

struct zero_executor_options {
  std::int32_t block_size = 16;
  std::int32_t num_kv_blocks = 1024;
  std::int64_t vocab_size = 32000;
  std::vector<token_id> avoid; ///< never returned (EOS, control tokens)
  std::chrono::microseconds step_time{0};
  /// Ids it may return: [0, n), the tokenizer's vocabulary; 0 = vocab_size.
  std::int64_t num_sampled_ids = 0;
  /// Compiled grammars over the tokenizer's ids as bytes, for requests with a grammar.
  std::shared_ptr<grammar::grammar_cache> grammars = nullptr;
};

class zero_executor final : public executor {
public:
  explicit zero_executor(zero_executor_options options);

  /// Sampled token for a chunk: a fixed function of the request id and the
  /// position, below num_sampled_ids, skipping `avoid`; logprob 0 and no
  /// alternatives. Under a grammar, an end id where the grammar may end,
  /// else the first token from there on that the grammar allows. Prompt logprobs, when asked, are the same: 0 for each.
  auto execute(const scheduler_output& step) -> step_result override;
  auto block_size() const -> std::int32_t override { return options_.block_size; }
  auto num_kv_blocks() const -> std::int32_t override { return options_.num_kv_blocks; }
  auto vocab_size() const -> std::int64_t override { return options_.vocab_size; }

private:
  zero_executor_options options_;
  std::vector<token_id> tokens_; ///< the ids it cycles through
  std::unordered_map<request_id, std::vector<token_id>> scoring_; ///< prompts to score, until the first token
  struct constrained {
    grammar::grammar_matcher matcher;
    std::int32_t tokens_left = 0;
  };
  std::unordered_map<request_id, constrained> constrained_;
};

} // namespace troupe
