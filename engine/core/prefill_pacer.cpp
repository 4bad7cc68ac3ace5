#include "engine/core/prefill_pacer.hpp"

#include <algorithm>
#include <cmath>

namespace troupe {
namespace {

// Moving averages: a decode step changes slowly with the batch; a prefill
// token's cost grows with the context its chunk attends to, so the latest
// weigh more.
constexpr double decode_weight = 0.25;
constexpr double token_weight = 0.5;
constexpr double pending_weight = 0.02;
// Credit saved up to this many steps' shares (a burst's bound).
constexpr double credit_steps = 1;

auto blend(double average, double sample, double weight) -> double {
  return average < 0 ? sample : average + weight * (sample - average);
}

} // namespace

prefill_pacer::prefill_pacer(double cost, std::int32_t max_chunk) : cost_(cost), max_chunk_(std::max(max_chunk, 1)) {}

void prefill_pacer::observe(std::int64_t decode_tokens, std::int64_t prefill_tokens, double seconds,
                            bool prefill_pending, std::int64_t admitted) {
  if (!enabled() || !(seconds >= 0)) return;
  if (prefill_tokens == 0) {
    if (decode_tokens == 0) return;
    since_decode_only_ = 0;
    if (!prefill_pending || decode_s_ < 0) {
      decode_s_ = blend(decode_s_, seconds, decode_weight);
      earn(0);
      return;
    }
    // Decodes alone while a prefill is under way: what they take past the
    // decodes' time before it is the prefill's doing too (its KV in the
    // caches, its memory traffic), and is charged to it. (The time itself
    // is followed, slowly: the batch may have changed.)
    earn(std::max(seconds - decode_s_, 0.0));
    decode_s_ = blend(decode_s_, seconds, pending_weight);
    return;
  }
  // The step's time past what its decodes alone would take (all of it when
  // nothing decoded: that counts the step's fixed cost too, and errs small).
  const double beyond = decode_tokens > 0 ? std::max(seconds - std::max(decode_s_, 0.0), 0.0) : seconds;
  if (admitted == 0 || token_s_ < 0) token_s_ = blend(token_s_, beyond / static_cast<double>(prefill_tokens), token_weight);
  if (decode_tokens > 0) {
    ++since_decode_only_;
    earn(beyond);
  }
}

void prefill_pacer::earn(double spent) {
  if (decode_s_ < 0) return;
  const double step = cost_ * decode_s_; // what one step that decodes may spend on prefill
  credit_s_ = std::min(credit_s_ + step - spent, credit_steps * step);
}

auto prefill_pacer::probe() const -> bool {
  return enabled() && (decode_s_ < 0 || since_decode_only_ >= probe_every);
}

auto prefill_pacer::solo_allowance() const -> std::int32_t {
  if (!enabled() || token_s_ <= 0) return max_chunk_;
  const double tokens = std::floor(solo_step_s / token_s_);
  if (!(tokens < static_cast<double>(max_chunk_))) return max_chunk_;
  return std::max(std::min(first_chunk, max_chunk_), static_cast<std::int32_t>(tokens));
}

auto prefill_pacer::allowance() const -> std::int32_t {
  if (!enabled()) return max_chunk_;
  if (decode_s_ < 0) return std::min(first_chunk, max_chunk_);
  if (credit_s_ < 0) return 0; // a chunk cost more than its share: decode alone until it is repaid
  if (token_s_ <= 0) return std::min(first_chunk, max_chunk_);
  const double tokens = std::floor((credit_s_ + cost_ * decode_s_) / token_s_);
  if (!(tokens < static_cast<double>(max_chunk_))) return max_chunk_;
  return std::max(std::min(min_chunk, max_chunk_), static_cast<std::int32_t>(tokens));
}

} // namespace troupe
