#pragma once
// A vectorised e^x for softmax, SiLU and the sampler: libm's expf is scalar,
// and at batch 32 the million exponentials of a stories110m step cost more
// than its attention.

#include <cstdint>
#include <cstring>

namespace troupe {

/// e^x within 3e-7 relative error for x in [-87, 88]; below -87 it returns
/// e^-87 ≈ 1.6e-38, above 88 e^88.
/// Written so that GCC vectorises a loop over it (no branches, no calls).
inline auto fast_exp(float x) -> float {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // e^x = 2^n · 2^f with n = round(x·log2 e), |f| <= 1/2.
  // Round to nearest by adding and removing 1.5·2^23 (|x·log2 e| < 2^22).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // f = x - n·ln2 in two steps (Cody & Waite): ln2's high part has few
  // enough bits that n·hi is exact, so f keeps full precision.
  const float f = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-6f;
  float p = 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  // 2^n from its bits; memcpy, unlike std::bit_cast, lets GCC 12 vectorise.
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

} // namespace troupe
