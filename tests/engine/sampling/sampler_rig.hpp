#pragma once
// What the sampler's tests share (sampler_test.cpp, sampler_forcing_test.cpp).

#include "base/rng.hpp"
#include "engine/core/sampling_params.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::testing {

/// Seeded sampling at `temperature`.
inline auto make_params(float temperature) -> sampling_params {
  sampling_params p;
  p.temperature = temperature;
  p.seed = 1234;
  return p;
}

/// `vocab` logits drawn from a normal distribution of standard deviation `scale`.
inline auto random_logits(std::size_t vocab, std::uint64_t seed, double scale) -> std::vector<float> {
  rng gen(seed);
  std::vector<float> out(vocab);
  for (float& l : out) l = static_cast<float>(scale * gen.normal());
  return out;
}

} // namespace troupe::testing
