// The generic kernels: plain C++, one weight row and one block at a time.
// They spell out the sums of quant_gemm.hpp literally; the vector kernels
// compute the same integers another way and then the same float chain.

#include "engine/cpu/quant_kernels.hpp"

#include "base/dtype.hpp"
#include "engine/formats/gguf_quant.hpp"
#include "engine/formats/mxfp4.hpp"

#include <cmath>
#include <cstring>

namespace troupe::quant {
namespace {

auto u8(const std::byte* p) -> const std::uint8_t* { return reinterpret_cast<const std::uint8_t*>(p); }

// One weight block as integers: the values (Q8_0/Q4_0/Q6_K centred, Q4_K and
// Q5_K from 0), the sub-block scales and, for Q4_K/Q5_K, mins.
struct decoded {
  int v[256];
  int sc[16];
  int mn[8];
  float d, dmin;
};

template <gguf::tensor_type T>
void decode(const std::byte* b, decoded& out) {
  using gguf::tensor_type;
  if constexpr (T == tensor_type::q8_0) {
    out.d = gguf::half_at(b);
    for (int i = 0; i < 32; ++i) out.v[i] = static_cast<std::int8_t>(u8(b + 2)[i]);
  } else if constexpr (T == tensor_type::q4_0) {
    out.d = gguf::half_at(b);
    for (int i = 0; i < 16; ++i) {
      out.v[i] = (u8(b + 2)[i] & 0x0F) - 8;
      out.v[i + 16] = (u8(b + 2)[i] >> 4) - 8;
    }
  } else if constexpr (T == tensor_type::q4_k || T == tensor_type::q5_k) {
    constexpr bool five = T == tensor_type::q5_k;
    out.d = gguf::half_at(b);
    out.dmin = gguf::half_at(b + 2);
    for (int j = 0; j < 8; ++j) {
      std::uint8_t sc, mn;
      gguf::k_scale_min(j, u8(b + 4), sc, mn);
      out.sc[j] = sc;
      out.mn[j] = mn;
    }
    const auto* qh = u8(b + 16);
    const auto* qs = u8(b + (five ? 48 : 16));
    // Sub-block 2c: the low nibbles of qs[32c, 32c + 32), 2c + 1: the high.
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        int lo = qs[32 * c + l] & 0x0F, hi = qs[32 * c + l] >> 4;
        if (five) {
          lo |= ((qh[l] >> (2 * c)) & 1) << 4;
          hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
        }
        out.v[64 * c + l] = lo;
        out.v[64 * c + 32 + l] = hi;
      }
  } else {
    static_assert(T == tensor_type::q6_k);
    const auto* ql = u8(b);
    const auto* qh = u8(b + 128);
    for (int s = 0; s < 16; ++s) out.sc[s] = static_cast<std::int8_t>(u8(b + 192)[s]);
    out.d = gguf::half_at(b + 208);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t lo = ql[64 * h + l], hi = ql[64 * h + l + 32], q = qh[32 * h + l];
        out.v[128 * h + l] = ((lo & 0x0F) | ((q & 3) << 4)) - 32;
        out.v[128 * h + l + 32] = ((hi & 0x0F) | (((q >> 2) & 3) << 4)) - 32;
        out.v[128 * h + l + 64] = ((lo >> 4) | (((q >> 4) & 3) << 4)) - 32;
        out.v[128 * h + l + 96] = ((hi >> 4) | (((q >> 6) & 3) << 4)) - 32;
      }
  }
}

auto dot(const int* v, const std::int8_t* q, int n) -> std::int32_t {
  std::int32_t s = 0;
  for (int i = 0; i < n; ++i) s += v[i] * q[i];
  return s;
}

template <gguf::tensor_type T>
void tile(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, const acts& a, float* y,
          std::int64_t ldy) {
  using gguf::tensor_type;
  constexpr bool small = T == tensor_type::q8_0 || T == tensor_type::q4_0;
  constexpr int block = small ? 32 : 256;
  const std::int64_t block_bytes = row_bytes / (a.k / block), num_blocks = a.k / block;
  auto* acc = reinterpret_cast<float*>(scratch(2, static_cast<std::size_t>(a.m) * sizeof(float)));
  decoded db;
  for (std::int64_t r = row0; r < row0 + nr; ++r) {
    for (std::int64_t i = 0; i < a.m; ++i) acc[i] = 0.0f;
    for (std::int64_t b = 0; b < num_blocks; ++b) {
      decode<T>(w + r * row_bytes + b * block_bytes, db);
      for (std::int64_t i = 0; i < a.m; ++i) {
        const std::int8_t* q = a.q + i * a.k + b * block;
        const float dx = a.d[i * num_blocks + b];
        if constexpr (small) {
          acc[i] = std::fma(db.d * dx, static_cast<float>(dot(db.v, q, 32)), acc[i]);
        } else if constexpr (T == tensor_type::q6_k) {
          std::int32_t isum = 0;
          for (int s = 0; s < 16; ++s) isum += db.sc[s] * dot(db.v + 16 * s, q + 16 * s, 16);
          acc[i] = std::fma(db.d * dx, static_cast<float>(isum), acc[i]);
        } else {
          std::int32_t isum = 0, msum = 0;
          for (int j = 0; j < 8; ++j) {
            isum += db.sc[j] * dot(db.v + 32 * j, q + 32 * j, 32);
            msum += db.mn[j] * a.neg_sum32[i * (a.k / 32) + b * 8 + j];
          }
          acc[i] = std::fma(db.d * dx, static_cast<float>(isum), acc[i]);
          acc[i] = std::fma(db.dmin * dx, static_cast<float>(msum), acc[i]);
        }
      }
    }
    for (std::int64_t i = 0; i < a.m; ++i) y[i * ldy + r] = acc[i];
  }
}

// MXFP4 weights through the Q8_0 tile (each MXFP4 block is exactly a Q8_0
// block, mxfp4.hpp, so the bits are Q8_0's): the call's rows are first
// converted (mxfp4::to_q8_0; the weights were checked with
// mxfp4::exact_in_q8_0 when loaded) into scratch slot 4. The vector ISAs
// decode MXFP4 in their own tiles.
void mxfp4_as_q8_0(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, const acts& a,
                   float* y, std::int64_t ldy) {
  const std::int64_t q8_row = a.k / 32 * 34;
  std::byte* q8 = scratch(4, static_cast<std::size_t>(nr * q8_row));
  for (std::int64_t r = 0; r < nr; ++r) (void)mxfp4::to_q8_0(w + (row0 + r) * row_bytes, q8 + r * q8_row, a.k);
  tile<gguf::tensor_type::q8_0>(q8, q8_row, 0, nr, a, y + row0, ldy);
}

} // namespace

auto generic_kernels() -> const kernel_set& {
  using gguf::tensor_type;
  static const kernel_set k{"generic", 16, tile<tensor_type::q8_0>, tile<tensor_type::q4_0>,
                            tile<tensor_type::q4_k>, tile<tensor_type::q5_k>, tile<tensor_type::q6_k>,
                            mxfp4_as_q8_0};
  return k;
}

} // namespace troupe::quant
