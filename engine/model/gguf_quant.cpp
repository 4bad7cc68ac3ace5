#include "engine/model/gguf_quant.hpp"

#include "engine/model/dtype.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace troupe::gguf {
namespace {

auto half(const std::byte* p) -> float {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

auto u8(const std::byte* p) -> const std::uint8_t* { return reinterpret_cast<const std::uint8_t*>(p); }

void q8_0(const std::byte* b, float* y) {
  const float d = half(b);
  const auto* q = reinterpret_cast<const std::int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q[i]);
}

void q4_0(const std::byte* b, float* y) {
  const float d = half(b);
  const auto* qs = u8(b + 2);
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>((qs[i] & 0x0F) - 8);
    y[i + 16] = d * static_cast<float>((qs[i] >> 4) - 8);
  }
}

// Q4_K and Q5_K: 4 chunks of 64 values, each two sub-blocks of 32 sharing a
// byte of nibbles (low nibble: the first sub-block) and, for Q5_K, a bit
// pair of qh (bit 2c: the first sub-block of chunk c, bit 2c+1: the second).
void k4_or_k5(const std::byte* b, float* y, bool five) {
  const float d = half(b), dmin = half(b + 2);
  const auto* scales = u8(b + 4);
  const auto* qh = five ? u8(b + 16) : nullptr;
  const auto* qs = u8(b + (five ? 48 : 16));
  for (int c = 0; c < 4; ++c) {
    std::uint8_t sc0, m0, sc1, m1;
    k_scale_min(2 * c, scales, sc0, m0);
    k_scale_min(2 * c + 1, scales, sc1, m1);
    const float d0 = d * sc0, d1 = d * sc1, min0 = dmin * m0, min1 = dmin * m1;
    for (int l = 0; l < 32; ++l) {
      int lo = qs[l] & 0x0F, hi = qs[l] >> 4;
      if (five) {
        lo += (qh[l] >> (2 * c)) & 1 ? 16 : 0;
        hi += (qh[l] >> (2 * c + 1)) & 1 ? 16 : 0;
      }
      y[l] = d0 * static_cast<float>(lo) - min0;
      y[32 + l] = d1 * static_cast<float>(hi) - min1;
    }
    qs += 32;
    y += 64;
  }
}

// Q6_K: two halves of 128 values; in each, 64 bytes of low nibbles (ql),
// 32 of high bit pairs (qh) and 8 scales (one per 16 values).
void q6_k(const std::byte* b, float* y) {
  const auto* ql = u8(b);
  const auto* qh = u8(b + 128);
  const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

} // namespace

void k_scale_min(int j, const std::uint8_t* scales, std::uint8_t& scale, std::uint8_t& min) {
  // Sub-blocks 0-3: the low 6 bits of bytes j and j+4. Sub-blocks 4-7: a
  // nibble of byte j+4 with the top two bits of bytes j-4 (scale) and j (min).
  if (j < 4) {
    scale = scales[j] & 63;
    min = scales[j + 4] & 63;
  } else {
    scale = static_cast<std::uint8_t>((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
    min = static_cast<std::uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

auto can_dequantize(tensor_type t) -> bool {
  switch (t) {
    case tensor_type::f32:
    case tensor_type::f16:
    case tensor_type::bf16:
    case tensor_type::q8_0:
    case tensor_type::q4_0:
    case tensor_type::q4_k:
    case tensor_type::q5_k:
    case tensor_type::q6_k: return true;
    default: return false;
  }
}

void dequantize_row(tensor_type t, const std::byte* src, float* dst, std::int64_t n) {
  if (!can_dequantize(t)) throw std::invalid_argument("cannot dequantize " + std::string(type_name(t)));
  const auto tr = *traits(static_cast<std::uint32_t>(t));
  if (n % tr.block_elements != 0)
    throw std::invalid_argument(std::to_string(n) + " values are not whole " + std::string(tr.name) + " blocks");
  const auto blocks = n / tr.block_elements;
  for (std::int64_t i = 0; i < blocks; ++i) {
    const auto* b = src + i * tr.block_bytes;
    float* y = dst + i * tr.block_elements;
    switch (t) {
      case tensor_type::f32: std::memcpy(y, b, 4); break;
      case tensor_type::f16: *y = half(b); break;
      case tensor_type::bf16: {
        std::uint16_t h;
        std::memcpy(&h, b, 2);
        *y = bf16_to_f32(h);
        break;
      }
      case tensor_type::q8_0: q8_0(b, y); break;
      case tensor_type::q4_0: q4_0(b, y); break;
      case tensor_type::q4_k: k4_or_k5(b, y, false); break;
      case tensor_type::q5_k: k4_or_k5(b, y, true); break;
      case tensor_type::q6_k: q6_k(b, y); break;
      default: break;
    }
  }
}

} // namespace troupe::gguf
