#pragma once
// Element types a checkpoint may store, and scalar conversions to float.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace troupe {

/// u8: raw bytes (gpt-oss's MXFP4 blocks and scales), never a weight's values.
enum class dtype : std::uint8_t { f32, f16, bf16, u8 };

/// Size in bytes of one element.
constexpr auto dtype_size(dtype t) -> std::size_t { return t == dtype::f32 ? 4 : t == dtype::u8 ? 1 : 2; }

/// Whether t holds real numbers a matrix product reads (F32, F16, BF16).
constexpr auto is_float(dtype t) -> bool { return t != dtype::u8; }

/// The safetensors spelling: "F32", "F16", "BF16", "U8".
constexpr auto dtype_name(dtype t) -> std::string_view {
  switch (t) {
    case dtype::f32: return "F32";
    case dtype::f16: return "F16";
    case dtype::bf16: return "BF16";
    case dtype::u8: return "U8";
  }
  return "?";
}

/// Parses a safetensors dtype name; nullopt for anything unsupported.
constexpr auto parse_dtype(std::string_view s) -> std::optional<dtype> {
  if (s == "F32") return dtype::f32;
  if (s == "F16") return dtype::f16;
  if (s == "BF16") return dtype::bf16;
  if (s == "U8") return dtype::u8;
  return std::nullopt;
}

inline auto bf16_to_f32(std::uint16_t h) -> float {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

/// Round-to-nearest-even; NaN stays NaN.
inline auto f32_to_bf16(float f) -> std::uint16_t {
  auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline auto f16_to_f32(std::uint16_t h) -> float {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) {
        man <<= 1;
        --exp;
      }
      man &= 0x3ffu;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

/// Round-to-nearest-even, overflow to infinity.
inline auto f32_to_f16(float f) -> std::uint16_t {
  const auto u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) // inf or nan
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u; // rounds past 65504
  if (abs < 0x38800000u) { // subnormal half or zero
    if (abs < 0x33000000u) return sign;
    const std::uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23); // 14..24: exponent 112..102
    std::uint32_t half = man >> shift;
    const std::uint32_t rem = man & ((1u << shift) - 1);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return sign | static_cast<std::uint16_t>(half);
  }
  std::uint32_t r = abs - 0x38000000u; // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<std::uint16_t>(r >> 13);
}

/// Reads element i of a buffer of type t as float.
inline auto load_as_f32(dtype t, const void* data, std::size_t i) -> float {
  switch (t) {
    case dtype::f32: {
      float f;
      std::memcpy(&f, static_cast<const std::byte*>(data) + i * 4, 4);
      return f;
    }
    case dtype::f16: {
      std::uint16_t h;
      std::memcpy(&h, static_cast<const std::byte*>(data) + i * 2, 2);
      return f16_to_f32(h);
    }
    case dtype::bf16: {
      std::uint16_t h;
      std::memcpy(&h, static_cast<const std::byte*>(data) + i * 2, 2);
      return bf16_to_f32(h);
    }
    case dtype::u8: return static_cast<float>(static_cast<const std::uint8_t*>(data)[i]);
  }
  return 0.0f;
}

} // namespace troupe
