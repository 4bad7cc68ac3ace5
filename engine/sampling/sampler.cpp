#include "engine/sampling/sampler.hpp"

#include "engine/model/model_config.hpp"
#include "base/vec_exp.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace troupe {

namespace {

/// Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS).
constexpr float greedy_temperature = 1e-5f;

/// Orders ids by descending logit, the lower id first on equal logits, so
/// that top-k and top-p pick the same set on every platform.
struct by_logit_desc {
  const float* logits;
  auto operator()(std::int32_t a, std::int32_t b) const -> bool {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

constexpr std::uint32_t num_buckets = 4096;

/// Histogram bucket of a probability: its top float bits, so that a larger
/// non-negative float never lands in a lower bucket.
auto bucket_of(float p) -> std::uint32_t {
  return (std::bit_cast<std::uint32_t>(p) >> 19) & (num_buckets - 1);
}

/// Lowest id among the largest values.
auto argmax(std::span<const float> values) -> token_id {
  token_id best = 0;
  for (std::size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best]) best = static_cast<token_id>(i);
  return best;
}

/// Inverse-CDF draw over the candidates id_at(0..num) whose probability is at
/// least `min_prob`; `u` is uniform in [0, 1). The walk runs in the same order
/// as the sum, so the mass reaches the total exactly; the fallback only covers
/// u * total rounding up to the total.
template <class IdAt>
auto inverse_cdf(std::span<const float> probs, std::int32_t num, IdAt id_at, float min_prob,
                 double u) -> token_id {
  double total = 0.0;
  for (std::int32_t j = 0; j < num; ++j) {
    const float p = probs[id_at(j)];
    if (p >= min_prob) total += p;
  }
  const double target = u * total;
  double mass = 0.0;
  token_id last = id_at(0);
  for (std::int32_t j = 0; j < num; ++j) {
    const token_id id = id_at(j);
    const float p = probs[id];
    if (!(p >= min_prob) || p <= 0.0f) continue;
    mass += p;
    last = id;
    if (mass > target) return id;
  }
  return last;
}

} // namespace

request_sampler::request_sampler(sampling_params params, std::span<const token_id> prompt,
                                 std::uint64_t fallback_seed, std::shared_ptr<grammar::compiled_grammar> grammar,
                                 bool jump_forward)
    : params_(std::move(params)), rng_(params_.seed.value_or(fallback_seed)),
      counts_needed_(params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                     params_.frequency_penalty != 0.0f),
      jump_forward_(jump_forward && grammar != nullptr && params_.logprobs < 0) {
  // Only the penalties read the prompt set and the output counts: without
  // them a request pays neither the sort nor a map node per new token.
  if (params_.repetition_penalty != 1.0f) {
    prompt_tokens_.assign(prompt.begin(), prompt.end());
    std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
    prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()),
                         prompt_tokens_.end());
  }
  if (counts_needed_)
    output_counts_.reserve(static_cast<std::size_t>(std::clamp(params_.max_tokens, 1, 4096)));
  scratch_top_.reserve(static_cast<std::size_t>(std::max(params_.logprobs, 0)) + 1);
  if (grammar) matcher_.emplace(std::move(grammar));
  thinking_inside_ = params_.thinking_opened;
}

auto request_sampler::sample(std::span<float> logits) -> sample_result {
  assert(!logits.empty());
  const auto vocab = static_cast<std::int32_t>(logits.size());
  if (matcher_) matcher_->mask(logits, params_.max_tokens - num_generated_);
  // A spent thinking budget leaves only its forced token, unless the grammar
  // has ruled that out here (NaN counts as allowed: it becomes 0).
  const token_id forced = forced_token();
  const bool forcing = forced >= 0 && forced < vocab && !(logits[forced] == -std::numeric_limits<float>::infinity());
  if (forcing) {
    std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
    logits[forced] = 0.0f;
  }

  // A broken checkpoint can produce NaN or infinite logits: NaN counts as
  // impossible (-inf) and +inf as the largest float, so the arithmetic below
  // stays finite. If nothing is possible at all, the lowest id is taken.
  const float max_logit = sanitize(logits);
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    sample_result none;
    none.token = 0;
    none.logprob = -std::numeric_limits<float>::infinity();
    record(none.token, false);
    return none;
  }

  // Raw log_softmax. At temperature 1 the exponentials double as the
  // sampling probabilities, unless a penalty changes a logit below.
  const bool probs_reusable = params_.temperature == 1.0f;
  scratch_probs_.resize(logits.size());
  float* e = scratch_probs_.data();
  float sum = 0.0f; // 16 partial sums under simd: float is accurate enough
#pragma omp simd reduction(+ : sum)
  for (std::int32_t i = 0; i < vocab; ++i) {
    e[i] = fast_exp(logits[i] - max_logit);
    sum += e[i];
  }
  const double log_sum_exp = static_cast<double>(max_logit) + std::log(static_cast<double>(sum));

  sample_result result;
  if (params_.logprobs > 0) result.top_logprobs = top_logprobs(logits, params_.logprobs, log_sum_exp);

  const bool penalised = apply_penalties(logits);
  result.token = params_.temperature < greedy_temperature
                     ? argmax(logits)
                     : draw(logits, probs_reusable && !penalised);
  // Reverse order: a token penalised twice gets its first saved (raw) value.
  for (auto it = scratch_saved_.rbegin(); it != scratch_saved_.rend(); ++it)
    logits[it->first] = it->second;
  result.logprob =
      static_cast<float>(static_cast<double>(logits[result.token]) - log_sum_exp);

  record(result.token, forcing);
  if (jump_forward_) take_forced(result);
  return result;
}

void request_sampler::record(token_id t, bool forced) {
  if (matcher_) matcher_->accept(t);
  count(t, forced);
}

void request_sampler::count(token_id t, bool forced) {
  if (counts_needed_) ++output_counts_[t];
  track_thinking(t, forced);
  ++num_generated_;
}

void request_sampler::take_forced(sample_result& result) {
  const auto& ends = matcher_->grammar().vocabulary().end_ids();
  if (std::find(ends.begin(), ends.end(), result.token) != ends.end()) return;
  if (params_.thinking_budget >= 0 && thinking_inside_) return; // (the budget's forcing comes first)
  // One token is left for the model after the forced ones: the mask's
  // promise to end within max_tokens holds.
  matcher_->take_forced(params_.max_tokens - num_generated_ - 1, result.forced); // (it accepts them)
  for (const auto t : result.forced) count(t, false);
}

auto request_sampler::forced_token() const -> token_id {
  const auto& close = params_.thinking_close;
  if (params_.thinking_budget < 0 || !thinking_inside_ || thinking_used_ < params_.thinking_budget ||
      forcing_ >= close.size())
    return -1;
  return close[forcing_];
}

void request_sampler::track_thinking(token_id t, bool forced) {
  if (params_.thinking_budget < 0) return;
  const auto& open = params_.thinking_open;
  const auto& close = params_.thinking_close;
  recent_.push_back(t);
  if (recent_.size() > std::max(open.size(), close.size())) recent_.erase(recent_.begin());
  const auto ends_with = [this](const std::vector<token_id>& marker) {
    return !marker.empty() && recent_.size() >= marker.size() &&
           std::equal(marker.rbegin(), marker.rend(), recent_.rbegin());
  };
  if (!thinking_inside_) {
    // A block opened again takes what is left of the budget, if anything.
    thinking_inside_ = ends_with(open);
    return;
  }
  if (ends_with(close)) {
    thinking_inside_ = false;
    forcing_ = 0;
  } else if (forced) {
    ++forcing_;
  } else {
    forcing_ = 0; // (a grammar refused the close: it is forced again from its start)
    ++thinking_used_;
  }
}

auto request_sampler::sanitize(std::span<float> logits) -> float {
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  constexpr float big = std::numeric_limits<float>::max();
  const auto vocab = static_cast<std::int32_t>(logits.size());
  float max_logit = neg_inf;
  float* data = logits.data();
#pragma omp simd reduction(max : max_logit)
  for (std::int32_t i = 0; i < vocab; ++i) {
    const float l = data[i] != data[i] ? neg_inf : (data[i] > big ? big : data[i]); // NaN, +inf
    data[i] = l;
    max_logit = max_logit > l ? max_logit : l;
  }
  return max_logit;
}

auto request_sampler::top_logprobs(std::span<const float> logits, std::int32_t n, double log_sum_exp)
    -> std::vector<token_logprob> {
  find_top(logits, std::min(n, static_cast<std::int32_t>(logits.size())));
  std::vector<token_logprob> top;
  top.reserve(scratch_top_.size());
  for (const auto& e : scratch_top_)
    top.push_back({e.token, static_cast<float>(static_cast<double>(e.logprob) - log_sum_exp)});
  return top;
}

auto request_sampler::score(std::span<float> logits, token_id token) -> sample_result {
  sample_result result;
  result.token = token;
  result.logprob = -std::numeric_limits<float>::infinity();
  const float max_logit = sanitize(logits);
  if (max_logit == -std::numeric_limits<float>::infinity()) return result;
  const auto vocab = static_cast<std::int32_t>(logits.size());
  const float* data = logits.data();
  float sum = 0.0f; // as sample() sums
#pragma omp simd reduction(+ : sum)
  for (std::int32_t i = 0; i < vocab; ++i) sum += fast_exp(data[i] - max_logit);
  const double log_sum_exp = static_cast<double>(max_logit) + std::log(static_cast<double>(sum));
  if (token >= 0 && token < vocab)
    result.logprob = static_cast<float>(static_cast<double>(data[token]) - log_sum_exp);
  if (params_.prompt_logprobs > 0) result.top_logprobs = top_logprobs(logits, params_.prompt_logprobs, log_sum_exp);
  return result;
}

auto request_sampler::find_top(std::span<const float> logits, std::int32_t n) -> void {
  // A short sorted list beats a heap for n <= 20; most logits fail the first
  // comparison against the current n-th best.
  scratch_top_.clear();
  const auto size = static_cast<std::size_t>(n);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (scratch_top_.size() == size) {
      if (!(l > scratch_top_.back().logprob)) continue;
      scratch_top_.pop_back();
    }
    // After every equal logit: those have lower ids.
    const auto pos = std::find_if(scratch_top_.begin(), scratch_top_.end(),
                                  [l](const token_logprob& e) { return e.logprob < l; });
    scratch_top_.insert(pos, {static_cast<token_id>(i), l});
  }
}

auto request_sampler::apply_penalties(std::span<float> logits) -> bool {
  scratch_saved_.clear();
  const auto vocab = static_cast<token_id>(logits.size());
  const auto in_vocab = [vocab](token_id t) { return t >= 0 && t < vocab; };

  // OpenAI's logit_bias first, as vLLM's logits processors ran before the penalties.
  for (const auto& [t, bias] : params_.logit_bias) {
    if (!in_vocab(t)) continue;
    float& l = logits[t];
    scratch_saved_.emplace_back(t, l);
    l += bias;
  }

  // Repetition penalty, HF/CTRL (Keskar et al. 2019): once per token seen in
  // the prompt or the output.
  const float repetition = params_.repetition_penalty;
  if (repetition != 1.0f) {
    const auto penalise = [&](token_id t) {
      if (!in_vocab(t)) return;
      float& l = logits[t];
      scratch_saved_.emplace_back(t, l);
      l = l > 0.0f ? l / repetition : l * repetition;
    };
    for (const token_id t : prompt_tokens_) penalise(t);
    for (const auto& [t, count] : output_counts_)
      if (!std::binary_search(prompt_tokens_.begin(), prompt_tokens_.end(), t)) penalise(t);
  }

  // OpenAI presence and frequency penalties, over output tokens only.
  const float presence = params_.presence_penalty;
  const float frequency = params_.frequency_penalty;
  if (presence != 0.0f || frequency != 0.0f) {
    for (const auto& [t, count] : output_counts_) {
      if (!in_vocab(t)) continue;
      float& l = logits[t];
      scratch_saved_.emplace_back(t, l);
      l -= presence + frequency * static_cast<float>(count);
    }
  }
  return !scratch_saved_.empty();
}

auto request_sampler::draw(std::span<const float> logits, bool probs_ready) -> token_id {
  const auto vocab = static_cast<std::int32_t>(logits.size());
  if (!probs_ready) {
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    if (!(max_logit > -std::numeric_limits<float>::infinity())) return argmax(logits);
    const float inv_temperature = 1.0f / params_.temperature;
    scratch_probs_.resize(logits.size());
    float* probs = scratch_probs_.data();
#pragma omp simd
    for (std::int32_t i = 0; i < vocab; ++i) probs[i] = fast_exp((logits[i] - max_logit) * inv_temperature);
  }
  // The most likely token has probability 1 here and survives top-k and
  // top-p, so min-p's bound min_p * p_max is just min_p.
  const std::span<const float> probs(scratch_probs_.data(), logits.size());
  const float min_prob = params_.min_p;
  const double u = rng_.uniform();

  const bool top_k_on = params_.top_k > 0 && params_.top_k < vocab;
  const bool top_p_on = params_.top_p < 1.0f;
  if (!top_k_on && !top_p_on)
    return inverse_cdf(probs, vocab, [](std::int32_t j) { return j; }, min_prob, u);

  std::int32_t num = 0;
  if (top_k_on) {
    num = params_.top_k;
    select_top_k(logits, num);
    if (top_p_on) {
      // The smallest sorted prefix of the top k holding top_p of their mass.
      double total = 0.0;
      for (std::int32_t j = 0; j < num; ++j) total += probs[scratch_idx_[j]];
      const double target = static_cast<double>(params_.top_p) * total;
      double mass = 0.0;
      for (std::int32_t j = 0; j < num; ++j) {
        mass += probs[scratch_idx_[j]];
        if (mass >= target) {
          num = j + 1;
          break;
        }
      }
    }
  } else {
    num = select_nucleus(logits);
  }
  const auto* idx = scratch_idx_.data();
  return inverse_cdf(probs, num, [idx](std::int32_t j) { return idx[j]; }, min_prob, u);
}

// Both selections bucket the probabilities by their top float bits (exponent
// and 4 mantissa bits, so a bucket spans a factor of at most 1 + 1/16), find
// the boundary bucket from a histogram, and sort only what they must. A higher
// bucket means a higher probability, hence a higher logit, so the buckets
// agree with by_logit_desc.

auto request_sampler::select_top_k(std::span<const float> logits, std::int32_t k) -> void {
  const std::span<const float> probs(scratch_probs_.data(), logits.size());
  std::array<std::int32_t, num_buckets> counts{};
  for (const float p : probs) ++counts[bucket_of(p)];
  std::uint32_t boundary = num_buckets - 1;
  for (std::int32_t above = 0; above + counts[boundary] < k; --boundary) above += counts[boundary];

  scratch_idx_.clear();
  for (std::size_t i = 0; i < probs.size(); ++i)
    if (bucket_of(probs[i]) >= boundary) scratch_idx_.push_back(static_cast<std::int32_t>(i));
  const auto first = scratch_idx_.begin();
  const by_logit_desc before{logits.data()};
  std::nth_element(first, first + k, scratch_idx_.end(), before);
  std::sort(first, first + k, before);
}

auto request_sampler::select_nucleus(std::span<const float> logits) -> std::int32_t {
  const std::span<const float> probs(scratch_probs_.data(), logits.size());
  std::array<double, num_buckets> masses{};
  for (const float p : probs) masses[bucket_of(p)] += p;
  const double total = std::accumulate(masses.begin(), masses.end(), 0.0);
  const double target = static_cast<double>(params_.top_p) * total;
  std::uint32_t boundary = num_buckets - 1;
  double mass = 0.0;
  for (; boundary > 0 && mass + masses[boundary] < target; --boundary) mass += masses[boundary];

  // Everything above the boundary bucket is in; its own tokens go in best
  // first until the mass is reached.
  scratch_idx_.clear();
  for (std::size_t i = 0; i < probs.size(); ++i)
    if (bucket_of(probs[i]) > boundary) scratch_idx_.push_back(static_cast<std::int32_t>(i));
  const auto num_above = static_cast<std::int32_t>(scratch_idx_.size());
  for (std::size_t i = 0; i < probs.size(); ++i)
    if (bucket_of(probs[i]) == boundary) scratch_idx_.push_back(static_cast<std::int32_t>(i));
  const auto num = static_cast<std::int32_t>(scratch_idx_.size());
  std::sort(scratch_idx_.begin() + num_above, scratch_idx_.end(), by_logit_desc{logits.data()});
  for (std::int32_t j = num_above; j < num; ++j) {
    mass += probs[scratch_idx_[j]];
    if (mass >= target) return j + 1;
  }
  return num;
}

auto default_sampling_params(const model_config& c) -> sampling_params {
  sampling_params p;
  p.temperature = c.default_temperature.value_or(p.temperature);
  p.top_p = c.default_top_p.value_or(p.top_p);
  p.top_k = c.default_top_k.value_or(p.top_k);
  p.min_p = c.default_min_p.value_or(p.min_p);
  p.repetition_penalty = c.default_repetition_penalty.value_or(p.repetition_penalty);
  return p;
}

} // namespace troupe
