#include "engine/formats/gguf_quant.hpp"

#include "engine/formats/mxfp4.hpp"

#include "base/dtype.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace troupe::gguf {
namespace {

auto u8(const std::byte* p) -> const std::uint8_t* { return reinterpret_cast<const std::uint8_t*>(p); }

void q8_0(const std::byte* b, float* y) {
  const float d = half_at(b);
  const auto* q = reinterpret_cast<const std::int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q[i]);
}

void q4_0(const std::byte* b, float* y) {
  const float d = half_at(b);
  const auto* qs = u8(b + 2);
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>((qs[i] & 0x0F) - 8);
    y[i + 16] = d * static_cast<float>((qs[i] >> 4) - 8);
  }
}

// Q5_0's 5-bit values: a nibble of qs (low nibbles: values 0-15, high:
// 16-31) and bit i of the 32-bit qh as the fifth bit of value i.
void q5_0_values(const std::byte* b, int* q) {
  std::uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const auto* qs = u8(b + 6);
  for (int i = 0; i < 16; ++i) {
    q[i] = (qs[i] & 0x0F) | static_cast<int>(((qh >> i) & 1u) << 4);
    q[i + 16] = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
  }
}

void q5_0(const std::byte* b, float* y) {
  const float d = half_at(b);
  int q[32];
  q5_0_values(b, q);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q[i] - 16);
}

// Q4_K and Q5_K: 4 chunks of 64 values, each two sub-blocks of 32 sharing a
// byte of nibbles (low nibble: the first sub-block) and, for Q5_K, a bit
// pair of qh (bit 2c: the first sub-block of chunk c, bit 2c+1: the second).
void k4_or_k5(const std::byte* b, float* y, bool five) {
  const float d = half_at(b), dmin = half_at(b + 2);
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
  const float d = half_at(b + 208);
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

/// Stores v as F16 at p; returns the value as stored.
auto put_half(std::byte* p, float v) -> float {
  const std::uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
  return f16_to_f32(h);
}

auto nearest(float v, int lo, int hi) -> int {
  const int q = static_cast<int>(std::lrintf(v));
  return std::clamp(q, lo, hi);
}

void quantize_q8_0(const float* x, std::byte* b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float dq = put_half(b, amax / 127.0f); // the scale as stored
  const float inv = dq != 0.0f ? 1.0f / dq : 0.0f;
  auto* q = reinterpret_cast<std::int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) q[i] = static_cast<std::int8_t>(nearest(x[i] * inv, -127, 127));
}

void quantize_q4_0(const float* x, std::byte* b) {
  // The value of largest magnitude maps to -8: d = it / -8, q = x/d + 8.
  float max = 0.0f;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
  const float dq = put_half(b, max / -8.0f);
  const float inv = dq != 0.0f ? 1.0f / dq : 0.0f;
  auto* qs = reinterpret_cast<std::uint8_t*>(b + 2);
  for (int i = 0; i < 16; ++i) {
    const int lo = nearest(x[i] * inv + 8.0f, 0, 15), hi = nearest(x[i + 16] * inv + 8.0f, 0, 15);
    qs[i] = static_cast<std::uint8_t>(lo | (hi << 4));
  }
}

void pack_k_scale_min(int j, std::uint8_t* scales, int scale, int min) {
  if (j < 4) {
    scales[j] = static_cast<std::uint8_t>((scales[j] & 0xC0) | scale);
    scales[j + 4] = static_cast<std::uint8_t>((scales[j + 4] & 0xC0) | min);
  } else {
    scales[j + 4] = static_cast<std::uint8_t>((scale & 0x0F) | ((min & 0x0F) << 4));
    scales[j - 4] = static_cast<std::uint8_t>((scales[j - 4] & 0x3F) | ((scale >> 4) << 6));
    scales[j] = static_cast<std::uint8_t>((scales[j] & 0x3F) | ((min >> 4) << 6));
  }
}

void quantize_k4_or_k5(const float* x, std::byte* b, bool five) {
  // Each sub-block of 32: x = scale*q - min with q in 0..top (15, Q5_K 31),
  // min = -(its smallest value, if negative), scale = its range / top. The 8
  // scales and mins are then stored as 6-bit multiples of d and dmin.
  const int top = five ? 31 : 15;
  std::array<float, 8> scale{}, min{};
  for (int j = 0; j < 8; ++j) {
    const float* v = x + 32 * j;
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < 32; ++l) lo = std::min(lo, v[l]), hi = std::max(hi, v[l]);
    min[static_cast<std::size_t>(j)] = -lo;
    scale[static_cast<std::size_t>(j)] = (hi - lo) / static_cast<float>(top);
  }
  const float max_scale = *std::max_element(scale.begin(), scale.end());
  const float max_min = *std::max_element(min.begin(), min.end());
  const float d = put_half(b, max_scale / 63.0f), dmin = put_half(b + 2, max_min / 63.0f);
  auto* scales = reinterpret_cast<std::uint8_t*>(b + 4);
  std::memset(scales, 0, 12);
  std::array<float, 8> eff_scale{}, eff_min{};
  for (int j = 0; j < 8; ++j) {
    const int sc = d != 0.0f ? nearest(scale[static_cast<std::size_t>(j)] / d, 0, 63) : 0;
    const int m = dmin != 0.0f ? nearest(min[static_cast<std::size_t>(j)] / dmin, 0, 63) : 0;
    pack_k_scale_min(j, scales, sc, m);
    eff_scale[static_cast<std::size_t>(j)] = d * static_cast<float>(sc);
    eff_min[static_cast<std::size_t>(j)] = dmin * static_cast<float>(m);
  }
  // The layout k4_or_k5 reads: nibbles, and for Q5_K the fifth bits in qh.
  auto* qh = reinterpret_cast<std::uint8_t*>(b + 16);
  auto* qs = reinterpret_cast<std::uint8_t*>(b + (five ? 48 : 16));
  if (five) std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      int q[2];
      for (int k = 0; k < 2; ++k) {
        const auto j = static_cast<std::size_t>(2 * c + k);
        const float s = eff_scale[j];
        q[k] = s != 0.0f ? nearest((x[32 * j + static_cast<std::size_t>(l)] + eff_min[j]) / s, 0, top) : 0;
        if (five && q[k] >= 16) qh[l] = static_cast<std::uint8_t>(qh[l] | (1 << (2 * c + k)));
      }
      qs[32 * c + l] = static_cast<std::uint8_t>((q[0] & 0x0F) | ((q[1] & 0x0F) << 4));
    }
  }
}

void quantize_q6_k(const float* x, std::byte* b) {
  // 16 sub-blocks of 16: x = d*sc*(q - 32), q in 0..63; the sub-block's
  // largest magnitude maps to -32; the scales are int8 multiples of d.
  std::array<float, 16> sub{};
  for (int s = 0; s < 16; ++s) {
    float max = 0.0f;
    for (int l = 0; l < 16; ++l)
      if (std::fabs(x[16 * s + l]) > std::fabs(max)) max = x[16 * s + l];
    sub[static_cast<std::size_t>(s)] = max / -32.0f;
  }
  float amax = 0.0f;
  for (const float v : sub) amax = std::max(amax, std::fabs(v));
  const float d = put_half(b + 208, amax / 127.0f);
  auto* ql = reinterpret_cast<std::uint8_t*>(b);
  auto* qh = reinterpret_cast<std::uint8_t*>(b + 128);
  auto* sc = reinterpret_cast<std::int8_t*>(b + 192);
  std::memset(b, 0, 192);
  std::array<int, 256> q{};
  for (int s = 0; s < 16; ++s) {
    const int scale = d != 0.0f ? nearest(sub[static_cast<std::size_t>(s)] / d, -128, 127) : 0;
    sc[s] = static_cast<std::int8_t>(scale);
    const float step = d * static_cast<float>(scale);
    for (int l = 0; l < 16; ++l)
      q[static_cast<std::size_t>(16 * s + l)] = step != 0.0f ? nearest(x[16 * s + l] / step + 32.0f, 0, 63) : 32;
  }
  // The layout of dequantize's q6_k, written instead of read.
  for (int h = 0; h < 2; ++h) {
    const auto* v = q.data() + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int q1 = v[l], q2 = v[l + 32], q3 = v[l + 64], q4 = v[l + 96];
      ql[64 * h + l] = static_cast<std::uint8_t>((q1 & 0x0F) | ((q3 & 0x0F) << 4));
      ql[64 * h + l + 32] = static_cast<std::uint8_t>((q2 & 0x0F) | ((q4 & 0x0F) << 4));
      qh[32 * h + l] = static_cast<std::uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

} // namespace

auto can_quantize(tensor_type t) -> bool {
  return t == tensor_type::q8_0 || t == tensor_type::q4_0 || t == tensor_type::q4_k || t == tensor_type::q5_k ||
         t == tensor_type::q6_k || t == tensor_type::mxfp4;
}

void quantize_row(tensor_type t, const float* x, std::byte* dst, std::int64_t n) {
  if (!can_quantize(t)) throw std::invalid_argument("cannot quantize to " + std::string(type_name(t)));
  const auto tr = *traits(static_cast<std::uint32_t>(t));
  if (n % tr.block_elements != 0)
    throw std::invalid_argument(std::to_string(n) + " values are not whole " + std::string(tr.name) + " blocks");
  for (std::int64_t i = 0; i < n / tr.block_elements; ++i) {
    const float* v = x + i * tr.block_elements;
    std::byte* b = dst + i * tr.block_bytes;
    switch (t) {
      case tensor_type::q8_0: quantize_q8_0(v, b); break;
      case tensor_type::q4_0: quantize_q4_0(v, b); break;
      case tensor_type::q4_k: quantize_k4_or_k5(v, b, false); break;
      case tensor_type::q5_k: quantize_k4_or_k5(v, b, true); break;
      case tensor_type::q6_k: quantize_q6_k(v, b); break;
      case tensor_type::mxfp4: mxfp4::quantize(v, b, 32); break;
      default: break;
    }
  }
}

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
    case tensor_type::q5_0:
    case tensor_type::q4_k:
    case tensor_type::q5_k:
    case tensor_type::q6_k:
    case tensor_type::mxfp4: return true;
    default: return false;
  }
}

void dequantize_row(tensor_type t, const std::byte* src, float* dst, std::int64_t n) {
  if (!can_dequantize(t)) throw std::invalid_argument("cannot dequantize " + std::string(type_name(t)));
  const auto tr = *traits(static_cast<std::uint32_t>(t));
  if (n % tr.block_elements != 0)
    throw std::invalid_argument(std::to_string(n) + " values are not whole " + std::string(tr.name) + " blocks");
  if (tr.block_elements == 1) { // F32, F16, BF16: element by element
    const auto type = t == tensor_type::f32 ? dtype::f32 : t == tensor_type::f16 ? dtype::f16 : dtype::bf16;
    for (std::int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(type, src, static_cast<std::size_t>(i));
    return;
  }
  for (std::int64_t i = 0; i < n / tr.block_elements; ++i) {
    const auto* b = src + i * tr.block_bytes;
    float* y = dst + i * tr.block_elements;
    switch (t) {
      case tensor_type::q8_0: q8_0(b, y); break;
      case tensor_type::q4_0: q4_0(b, y); break;
      case tensor_type::q5_0: q5_0(b, y); break;
      case tensor_type::q4_k: k4_or_k5(b, y, false); break;
      case tensor_type::q5_k: k4_or_k5(b, y, true); break;
      case tensor_type::q6_k: q6_k(b, y); break;
      case tensor_type::mxfp4: mxfp4::dequantize(b, y, 32); break;
      default: break;
    }
  }
}

void q5_0_to_q8_0(const std::byte* src, std::byte* dst, std::int64_t n) {
  if (n % 32 != 0) throw std::invalid_argument(std::to_string(n) + " values are not whole Q5_0 blocks");
  for (std::int64_t i = 0; i < n / 32; ++i) {
    const std::byte* b = src + i * 22;
    std::byte* o = dst + i * 34;
    std::memcpy(o, b, 2); // the same F16 scale
    int q[32];
    q5_0_values(b, q);
    for (int j = 0; j < 32; ++j) o[2 + j] = static_cast<std::byte>(static_cast<std::int8_t>(q[j] - 16));
  }
}

} // namespace troupe::gguf
