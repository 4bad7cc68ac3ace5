#pragma once
// What a request asks of the sampler, as in OpenAI's and vLLM's APIs.

#include "base/types.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe {

/// Per-request sampling settings. Defaults sample the plain softmax.
struct sampling_params {
  float temperature = 1.0f;       ///< 0 means greedy (argmax)
  std::int32_t top_k = 0;         ///< 0 or -1: off; else keep the k most likely
  float top_p = 1.0f;             ///< nucleus mass in (0, 1]; 1 is off
  float min_p = 0.0f;             ///< in [0, 1]; drop tokens below min_p * p_max
  float repetition_penalty = 1.0f; ///< > 0; HF/CTRL style, over prompt + output
  float presence_penalty = 0.0f;  ///< in [-2, 2]; OpenAI style, over output
  float frequency_penalty = 0.0f; ///< in [-2, 2]; OpenAI style, over output
  std::optional<std::uint64_t> seed; ///< same seed, same prompt -> same text
  std::int32_t max_tokens = 16;   ///< >= 1; generation stops after this many
  std::vector<token_id> stop_token_ids; ///< finish when one is sampled (not shown)
  std::vector<std::string> stop;  ///< finish when the text contains one (cut off)
  bool ignore_eos = false;        ///< keep going past the model's EOS tokens
  std::int32_t logprobs = -1;     ///< -1: none; n >= 0: sampled + top-n logprobs
  /// -1: none; n >= 0: each prompt token's logprob (but the first's) and
  /// the top n there, computed in prefill (vLLM's prompt_logprobs). Such a
  /// request takes no prefix-cache hits: every position is computed.
  std::int32_t prompt_logprobs = -1;
  /// (id, bias in [-100, 100]) added to the logits before any sampler, greedy
  /// included (OpenAI's logit_bias); one entry per id. The caller checks the
  /// ids against the tokenizer's vocabulary.
  std::vector<std::pair<token_id, float>> logit_bias;
  /// GBNF text the output must match (engine/grammar): structured output,
  /// a regex, choices or a forced tool call, written by the API layer, which
  /// has checked that it compiles. "" is none. Applied before every other
  /// step of sampling, greedy included; logprobs are then of the masked
  /// distribution.
  std::string grammar;
  /// A reasoning model's thinking budget (vLLM's thinking_token_budget,
  /// Anthropic's thinking.budget_tokens): -1 none; n >= 0: once n tokens in
  /// all were written inside thinking blocks, the block's close is forced,
  /// one token a step, as a mask that keeps only it (a grammar that forbids
  /// it there wins). The caller sets the markers as the tokenizer encodes
  /// them (<think> and </think>), and whether the prompt opened the block.
  std::int32_t thinking_budget = -1;
  std::vector<token_id> thinking_open, thinking_close;
  bool thinking_opened = false;

  /// Empty when valid, else one line naming the bad field, e.g.
  /// "top_p must be in (0, 1], got 1.5".
  [[nodiscard]] auto validate() const -> std::string;
  friend auto operator==(const sampling_params&, const sampling_params&) -> bool = default;
};

} // namespace troupe
