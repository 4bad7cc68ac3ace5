#include "engine/formats/mxfp4.hpp"

#include "base/dtype.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace troupe::mxfp4 {
namespace {

auto scale_of(std::uint8_t e) -> float { return std::ldexp(1.0f, static_cast<int>(e) - 128); }

void check_whole(std::int64_t n) {
  if (n % block_values != 0) throw std::invalid_argument(std::to_string(n) + " values are not whole MXFP4 blocks");
}

} // namespace

void dequantize(const std::byte* src, float* dst, std::int64_t n) {
  check_whole(n);
  for (std::int64_t b = 0; b < n / block_values; ++b) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(src + b * block_bytes);
    const float d = scale_of(p[0]);
    for (int j = 0; j < 16; ++j) {
      dst[b * 32 + j] = values[p[1 + j] & 0x0F] * d;
      dst[b * 32 + 16 + j] = values[p[1 + j] >> 4] * d;
    }
  }
}

void quantize(const float* x, std::byte* dst, std::int64_t n) {
  check_whole(n);
  for (std::int64_t b = 0; b < n / block_values; ++b) {
    const float* v = x + b * 32;
    auto* p = reinterpret_cast<std::uint8_t*>(dst + b * block_bytes);
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
    const auto e = amax > 0.0f ? static_cast<std::uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : std::uint8_t{0};
    const float d = scale_of(e);
    const auto nearest = [&](float value) {
      int best = 0;
      float err = std::fabs(value - values[0] * d);
      for (int i = 1; i < 16; ++i)
        if (const float e2 = std::fabs(value - values[i] * d); e2 < err) best = i, err = e2;
      return best;
    };
    p[0] = e;
    for (int j = 0; j < 16; ++j) p[1 + j] = static_cast<std::uint8_t>(nearest(v[j]) | (nearest(v[16 + j]) << 4));
  }
}

auto to_q8_0(const std::byte* src, std::byte* dst, std::int64_t n) -> bool {
  check_whole(n);
  for (std::int64_t b = 0; b < n / block_values; ++b) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(src + b * block_bytes);
    std::byte* o = dst + b * 34;
    std::int8_t q[32];
    bool zero = true;
    for (int j = 0; j < 16; ++j) {
      q[j] = values[p[1 + j] & 0x0F];
      q[16 + j] = values[p[1 + j] >> 4];
      zero = zero && q[j] == 0 && q[16 + j] == 0;
    }
    const float d = zero ? 0.0f : scale_of(p[0]);
    const std::uint16_t h = f32_to_f16(d);
    if (f16_to_f32(h) != d) return false;
    std::memcpy(o, &h, 2);
    std::memcpy(o + 2, q, 32);
  }
  return true;
}

auto exact_in_q8_0(const std::byte* src, std::int64_t n) -> bool {
  check_whole(n);
  for (std::int64_t b = 0; b < n / block_values; ++b) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(src + b * block_bytes);
    if (p[0] >= q8_0_min_e && p[0] <= q8_0_max_e) continue;
    for (int j = 1; j <= 16; ++j)
      if ((p[j] & 0x77) != 0) return false; // codes 0 and 8 are the two zeros
  }
  return true;
}

void from_hf(const std::uint8_t* blocks, const std::uint8_t* scales, std::byte* dst, std::int64_t n) {
  check_whole(n);
  for (std::int64_t b = 0; b < n / block_values; ++b) {
    const std::uint8_t* hf = blocks + b * 16;
    std::uint8_t code[32];
    for (int j = 0; j < 16; ++j) {
      code[2 * j] = hf[j] & 0x0F;
      code[2 * j + 1] = hf[j] >> 4;
    }
    auto* p = reinterpret_cast<std::uint8_t*>(dst + b * block_bytes);
    p[0] = scales[b];
    for (int j = 0; j < 16; ++j) p[1 + j] = static_cast<std::uint8_t>(code[j] | (code[16 + j] << 4));
  }
}

} // namespace troupe::mxfp4
