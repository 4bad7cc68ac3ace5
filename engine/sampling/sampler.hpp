#pragma once
// Turns one row of logits into a token, per request, deterministically.

#include "base/rng.hpp"
#include "engine/core/sample_result.hpp"
#include "engine/core/sampling_params.hpp"
#include "base/types.hpp"
#include "engine/grammar/grammar_matcher.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe {

struct model_config;

/// A request's settings before it says anything: sampling_params{} with the
/// temperature, top_p, top_k, min_p and repetition_penalty of the model's
/// generation_config.json (its max_new_tokens: model_config::default_max_tokens).
auto default_sampling_params(const model_config& c) -> sampling_params;

/// One request's sampler: its parameters, its random stream and the counts the
/// penalties need. Not thread-safe; one per request.
class request_sampler {
public:
  /// `fallback_seed` is used when params.seed is unset (the caller draws it
  /// from its own seeded generator, so runs stay reproducible).
  /// `grammar`: the compiled params.grammar (null when it is ""), whose
  /// mask comes first, with params.max_tokens as the budget it ends within.
  /// `jump_forward`: after each token, the bytes the grammar forces come as
  /// sample_result::forced (not for a request asking for logprobs, nor inside
  /// a thinking block a budget counts).
  request_sampler(sampling_params params, std::span<const token_id> prompt,
                  std::uint64_t fallback_seed, std::shared_ptr<grammar::compiled_grammar> grammar = nullptr,
                  bool jump_forward = false);

  /// Samples from `logits` (overwritten as scratch) and records the token as
  /// generated. The ids it may return, and that logprobs cover, are
  /// [0, logits.size()): pass a prefix of a model's row to leave out the rows
  /// past the tokenizer's vocabulary (nothing past the span is read; penalties
  /// on prompt ids past it are ignored). Logprobs are log_softmax of the
  /// logits as given, before logit_bias, penalties and temperature. Order as
  /// in vLLM: logit_bias, repetition penalty,
  /// presence/frequency penalties, then greedy argmax (temperature < 1e-5,
  /// lowest id on ties) or temperature, top-k, top-p, min-p and an inverse-CDF
  /// draw. Top-k keeps exactly k tokens (lower id first on equal logits).
  /// O(vocab) plus O(k log k) for top-k; top-p alone sorts only the tokens
  /// whose probability is within 1/16 of the nucleus boundary. No allocation
  /// once the scratch has grown to the vocab size, but the top_logprobs.
  /// A grammar's mask applies first, then a spent thinking budget's forced
  /// token (the only one left; its logprob is then 0, as under a mask).
  auto sample(std::span<float> logits) -> sample_result;

  /// What the logits thought of `token`, which came next in the prompt:
  /// its logprob and params.prompt_logprobs alternatives, under the raw
  /// logits as sample() reports them (NaN counted as -inf, in place). Draws
  /// nothing and records nothing; an id past the span scores -inf.
  auto score(std::span<float> logits, token_id token) -> sample_result;

  auto params() const -> const sampling_params& { return params_; }
  auto num_generated() const -> std::int32_t { return num_generated_; }

private:
  sampling_params params_;
  rng rng_;
  std::optional<grammar::grammar_matcher> matcher_;
  bool counts_needed_;                                       ///< some penalty is on
  bool jump_forward_;
  std::unordered_map<token_id, std::int32_t> output_counts_; ///< only when counts_needed_
  std::vector<token_id> prompt_tokens_; ///< sorted, unique: repetition penalty
  std::int32_t num_generated_ = 0;
  std::vector<std::int32_t> scratch_idx_; ///< candidate ids for top-k / top-p
  std::vector<float> scratch_probs_;      ///< unnormalised probabilities, max 1
  std::vector<token_logprob> scratch_top_; ///< best raw logits, best first
  std::vector<std::pair<token_id, float>> scratch_saved_; ///< logits before penalties
  // The thinking budget (params_.thinking_budget >= 0).
  bool thinking_inside_ = false;
  std::int32_t thinking_used_ = 0; ///< tokens written inside blocks, their markers aside
  std::size_t forcing_ = 0;        ///< the close marker's tokens forced so far
  std::vector<token_id> recent_;   ///< the last tokens, as many as the longer marker has

  /// The token the thinking budget forces next; -1 when none.
  auto forced_token() const -> token_id;
  /// Follows the thinking blocks over the generated token `t`.
  void track_thinking(token_id t, bool forced);
  /// Records a generated token: the grammar, then count().
  void record(token_id t, bool forced);
  /// Counts a generated token the grammar has taken: the penalties, the thinking budget.
  void count(token_id t, bool forced);
  /// Jump-forward after `result.token`: the grammar's forced tokens, recorded.
  void take_forced(sample_result& result);

  /// Replaces NaN by -inf and +inf by the largest float; returns the largest.
  static auto sanitize(std::span<float> logits) -> float;
  /// The top n logprobs, given log(sum(exp(logits))).
  auto top_logprobs(std::span<const float> logits, std::int32_t n, double log_sum_exp) -> std::vector<token_logprob>;
  /// Fills scratch_top_ with the n largest logits, lower id first on ties.
  auto find_top(std::span<const float> logits, std::int32_t n) -> void;
  /// Applies the penalties in place, saving originals; false if none changed.
  auto apply_penalties(std::span<float> logits) -> bool;
  /// Draws from the (penalised) logits with temperature, top-k, top-p, min-p;
  /// scratch_probs_ already holds exp(logit - max) when `probs_ready`.
  auto draw(std::span<const float> logits, bool probs_ready) -> token_id;
  /// Puts the k most likely ids, sorted, first in scratch_idx_. O(vocab + k log k).
  auto select_top_k(std::span<const float> logits, std::int32_t k) -> void;
  /// Puts the top-p nucleus of the whole vocab in scratch_idx_ (any order)
  /// and returns its size. O(vocab) plus a sort of the boundary bucket.
  auto select_nucleus(std::span<const float> logits) -> std::int32_t;
};

} // namespace troupe
