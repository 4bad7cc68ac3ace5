#include "engine/core/prefill_pacer.hpp"

#include <algorithm>
#include <cmath>

namespace troupe {
namespace {

// A decode step changes slowly with the batch; a token's cost grows with
// the context its chunk attends to, so the latest chunks weigh more.
constexpr double decode_weight = 0.25;
constexpr double chunk_decay = 0.5;
// Credit saved up to this many steps' shares (a burst's bound), or to a
// chunk of min_chunk tokens.
constexpr double credit_steps = 1;
// Decode-only steps this soon after a chunk are charged what they take past
// the decodes' time; later ones measure that time (the batch grows, its
// contexts lengthen, while a long prompt prefills).
constexpr std::int32_t settle_steps = 3;
// The most of a step's share such a step is charged.
constexpr double max_charge = 0.9;

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
    ++since_chunk_;
    if (!prefill_pending || decode_s_ < 0 || since_chunk_ > settle_steps) {
      decode_s_ = blend(decode_s_, seconds, decode_weight);
      decode_tokens_ = blend(decode_tokens_, static_cast<double>(decode_tokens), decode_weight);
      earn(0);
      return;
    }
    // Decodes alone just after a chunk: what they take past the decodes'
    // time is the chunk's doing (its KV in the caches, its memory traffic);
    // less is refunded (both ways, so a step's noise is no charge on average).
    earn(std::clamp(seconds - decode_time(decode_tokens), -share(), max_charge * share()));
    return;
  }
  since_chunk_ = 0;
  // The step's time past what its decodes alone would take (all of it when
  // nothing decoded: that counts the step's fixed cost too, and errs small).
  const double beyond = decode_tokens > 0 ? std::max(seconds - decode_time(decode_tokens), 0.0) : seconds;
  if (admitted == 0 || chunk_s_ < 0) {
    chunk_tokens_ = chunk_decay * chunk_tokens_ + static_cast<double>(prefill_tokens);
    chunk_s_ = chunk_decay * std::max(chunk_s_, 0.0) + beyond;
  }
  if (decode_tokens > 0) {
    ++since_decode_only_;
    earn(beyond);
  }
}

auto prefill_pacer::decode_time(std::int64_t decode_tokens) const -> double {
  if (decode_s_ < 0) return 0;
  return decode_s_ * std::max(1.0, static_cast<double>(decode_tokens) / std::max(decode_tokens_, 1.0));
}

auto prefill_pacer::tokens_for(double seconds) const -> std::int32_t {
  if (!(chunk_s_ > 0)) return max_chunk_;
  const double tokens = std::floor(seconds * chunk_tokens_ / chunk_s_);
  if (!(tokens < static_cast<double>(max_chunk_))) return max_chunk_;
  return std::max(1, static_cast<std::int32_t>(tokens));
}

auto prefill_pacer::saving_target() const -> double {
  const double chunk = chunk_s_ > 0 ? std::min(min_chunk, max_chunk_) * chunk_s_ / chunk_tokens_ : 0;
  return std::max(credit_steps * share(), std::min(chunk, solo_step_s));
}

void prefill_pacer::earn(double spent) {
  if (decode_s_ < 0) return;
  credit_s_ = std::min(credit_s_ + share() - spent, saving_target());
}

auto prefill_pacer::probe() const -> bool {
  return enabled() && (decode_s_ < 0 || since_decode_only_ >= probe_every);
}

auto prefill_pacer::solo_allowance() const -> std::int32_t {
  if (!enabled() || chunk_s_ < 0) return max_chunk_;
  return std::max(std::min(first_chunk, max_chunk_), tokens_for(solo_step_s));
}

auto prefill_pacer::allowance() const -> std::int32_t {
  if (!enabled()) return max_chunk_;
  if (decode_s_ < 0 || chunk_s_ < 0) return std::min(first_chunk, max_chunk_);
  const double credit = credit_s_ + share(); // (this step's share included)
  if (credit_s_ < 0 || credit < saving_target()) return 0; // repaying a chunk, or saving up for one
  return tokens_for(credit);
}

} // namespace troupe
