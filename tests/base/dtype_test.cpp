#include "base/dtype.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

using namespace troupe;

namespace {

auto bits(float f) -> std::uint32_t { return std::bit_cast<std::uint32_t>(f); }
auto from_bits(std::uint32_t u) -> float { return std::bit_cast<float>(u); }

auto is_f16_nan(std::uint16_t h) -> bool { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
auto is_bf16_nan(std::uint16_t h) -> bool { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

/// The correctly rounded half for x, found by comparing neighbours in double.
template <class ToFloat>
void check_nearest_even(float x, std::uint16_t h, ToFloat to_float) {
  const double exact = x;
  const double err = std::abs(exact - to_float(h));
  for (const int step : {-1, 1}) {
    const auto n = static_cast<std::uint16_t>(h + step);
    if ((n & 0x8000u) != (h & 0x8000u)) continue; // crossed the sign: not a neighbour
    const double n_err = std::abs(exact - to_float(n));
    CHECK(err <= n_err);
    if (err == n_err) CHECK((h & 1u) == 0u); // ties to even
  }
}

} // namespace

TEST_CASE("dtype names, sizes and parsing") {
  CHECK(dtype_size(dtype::f32) == 4);
  CHECK(dtype_size(dtype::f16) == 2);
  CHECK(dtype_size(dtype::bf16) == 2);
  CHECK(dtype_name(dtype::bf16) == "BF16");
  CHECK(parse_dtype("F32") == dtype::f32);
  CHECK(parse_dtype("F16") == dtype::f16);
  CHECK(parse_dtype("BF16") == dtype::bf16);
  CHECK_FALSE(parse_dtype("I8").has_value());
  CHECK_FALSE(parse_dtype("f32").has_value());
  CHECK_FALSE(parse_dtype("F64").has_value());
}

TEST_CASE("f16 conversions of exact values") {
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(-2.0f) == 0xc000);
  CHECK(f32_to_f16(0.0f) == 0x0000);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(std::ldexp(1.0f, -14)) == 0x0400);       // smallest normal
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);       // smallest subnormal
  CHECK(f32_to_f16(std::ldexp(1023.0f, -24)) == 0x03ff);    // largest subnormal
  CHECK(f32_to_f16(-std::ldexp(5.0f, -24)) == 0x8005);
  CHECK(f16_to_f32(0x3555) == 0.333251953125f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(f16_to_f32(0x8200) == -std::ldexp(1.0f, -15));
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(bits(f16_to_f32(0x8000)) == 0x80000000u);
}

TEST_CASE("f16 rounding, overflow, inf and nan") {
  // Halfway cases round to even.
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(f32_to_f16(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);         // half of the smallest subnormal: to even (0)
  CHECK(f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);         // 1.5 subnormal ulps: to even (2)
  CHECK(f32_to_f16(std::ldexp(1.0f, -25) * 1.0001f) == 0x0001); // just above half
  CHECK(f32_to_f16(std::ldexp(1.0f, -26)) == 0x0000);
  CHECK(f32_to_f16(std::ldexp(2047.0f, -25)) == 0x0400);      // largest subnormal + half ulp -> smallest normal
  // Overflow: 65519.99 rounds down, 65520 (halfway to 2^16) rounds to inf.
  CHECK(f32_to_f16(65519.0f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);
  CHECK(f32_to_f16(-1e10f) == 0xfc00);
  CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(f32_to_f16(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(is_f16_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(is_f16_nan(f32_to_f16(from_bits(0x7f800001u)))); // signalling nan with low payload stays nan
  CHECK(std::isinf(f16_to_f32(0x7c00)));
  CHECK(std::isnan(f16_to_f32(0x7e00)));
  CHECK(std::isnan(f16_to_f32(0xfc01)));
}

TEST_CASE("every f16 value survives f16 -> f32 -> f16") {
  int mismatches = 0;
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const float f = f16_to_f32(half);
    if (is_f16_nan(half)) {
      if (!std::isnan(f) || !is_f16_nan(f32_to_f16(f))) ++mismatches;
    } else if (f32_to_f16(f) != half) {
      ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("f32 -> f16 rounds to nearest even on random inputs") {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> exponent(-26.0f, 15.9f);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int i = 0; i < 20000; ++i) {
    float x = std::ldexp(mantissa(rng), static_cast<int>(std::floor(exponent(rng))));
    if (i % 2) x = -x;
    if (std::abs(x) > 65504.0f) continue;
    check_nearest_even(x, f32_to_f16(x), f16_to_f32);
  }
}

TEST_CASE("bf16 conversions, rounding, subnormals, inf and nan") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(f32_to_bf16(-2.0f) == 0xc000);
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0x4049) == 3.140625f);
  CHECK(f32_to_bf16(3.14159265f) == 0x4049);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80); // tie -> even
  CHECK(f32_to_bf16(1.0f + std::ldexp(3.0f, -8)) == 0x3f82); // tie -> even
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(f32_to_bf16(from_bits(0x000116c2u)) == 0x0001);      // f32 subnormal keeps its top bits
  CHECK(f32_to_bf16(from_bits(0x00018000u)) == 0x0002);      // subnormal tie -> even
  CHECK(bf16_to_f32(0x0001) == from_bits(0x00010000u));
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80); // rounds past the largest bf16
  CHECK(f32_to_bf16(from_bits(0x7f7f7fffu)) == 0x7f7f);
  CHECK(f32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(is_bf16_nan(f32_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(is_bf16_nan(f32_to_bf16(from_bits(0x7f800001u)))); // payload only in the dropped bits
  CHECK(std::isnan(bf16_to_f32(0x7fc0)));
  CHECK(bits(bf16_to_f32(0x8000)) == 0x80000000u);
}

TEST_CASE("every bf16 value survives bf16 -> f32 -> bf16") {
  int mismatches = 0;
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const float f = bf16_to_f32(b);
    if (is_bf16_nan(b)) {
      if (!std::isnan(f) || !is_bf16_nan(f32_to_bf16(f))) ++mismatches;
    } else if (f32_to_bf16(f) != b) {
      ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("f32 -> bf16 rounds to nearest even on random inputs") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any_bits(0, 0x7f7effffu); // finite, below the rounding edge
  for (int i = 0; i < 20000; ++i) {
    const float x = from_bits(any_bits(rng) | (i % 2 ? 0x80000000u : 0u));
    check_nearest_even(x, f32_to_bf16(x), bf16_to_f32);
  }
}

TEST_CASE("load_as_f32 reads each dtype at unaligned addresses") {
  alignas(4) std::byte buf[1 + 3 * 4];
  const float values[3] = {1.5f, -0.25f, 1e-3f};
  std::memcpy(buf + 1, values, sizeof values);
  CHECK(load_as_f32(dtype::f32, buf + 1, 0) == 1.5f);
  CHECK(load_as_f32(dtype::f32, buf + 1, 2) == 1e-3f);
  const std::uint16_t halves[2] = {0x3c00, 0xc500}; // 1, -5
  std::memcpy(buf + 1, halves, sizeof halves);
  CHECK(load_as_f32(dtype::f16, buf + 1, 1) == -5.0f);
  const std::uint16_t brains[2] = {0x3f80, 0x4049};
  std::memcpy(buf + 1, brains, sizeof brains);
  CHECK(load_as_f32(dtype::bf16, buf + 1, 1) == 3.140625f);
}
