// quant_gemm's kernels for AVX2: 8 weight rows a tile; vpmaddubsw and
// vpmaddwd stand in for VNNI's vpdpbusd.

#include "engine/cpu/quant_kernels.hpp"
#include "engine/formats/mxfp4.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace troupe::quant {
namespace {

struct avx2 {
  using vi = __m256i;
  using vf = __m256;
  static constexpr int R = 8;
  static constexpr bool vnni = false;
  // 16 registers: 4 rows of x (8 or 12 accumulators).
  static constexpr int mr_small = 4, mr_k = 4;

  static auto load256(const std::byte* p) -> vi { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static auto load128(const std::byte* p) -> __m128i { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

  // 8 rows × 32 bytes: out[g] lane r = bytes 4g..4g+3 of row r (an 8×8
  // transpose of 32-bit elements).
  static void transpose32(const std::byte* const* p, std::int64_t off, vi* out) {
    vi r[8];
    for (int i = 0; i < 8; ++i) r[i] = load256(p[i] + off);
    vi u[8];
    for (int h = 0; h < 2; ++h) {
      const vi* rh = r + 4 * h;
      const vi t0 = _mm256_unpacklo_epi32(rh[0], rh[1]), t1 = _mm256_unpackhi_epi32(rh[0], rh[1]);
      const vi t2 = _mm256_unpacklo_epi32(rh[2], rh[3]), t3 = _mm256_unpackhi_epi32(rh[2], rh[3]);
      u[4 * h] = _mm256_unpacklo_epi64(t0, t2);
      u[4 * h + 1] = _mm256_unpackhi_epi64(t0, t2);
      u[4 * h + 2] = _mm256_unpacklo_epi64(t1, t3);
      u[4 * h + 3] = _mm256_unpackhi_epi64(t1, t3);
    }
    for (int g = 0; g < 4; ++g) {
      out[g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x20);
      out[4 + g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x31);
    }
  }

  // 8 rows × 16 bytes: out[g] lane r = bytes 4g..4g+3 of row r. Register q
  // holds rows q and q + 4; a 4×4 transpose in each 128-bit lane.
  static void transpose16(const std::byte* const* p, std::int64_t off, vi* out) {
    vi z[4];
    for (int q = 0; q < 4; ++q) z[q] = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p[q + 4] + off),
                                                           reinterpret_cast<const __m128i*>(p[q] + off));
    const vi t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
    const vi t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
  }

  static auto gather(const std::byte* base, const std::int32_t* rel) -> vi {
    return _mm256_i32gather_epi32(reinterpret_cast<const int*>(base),
                                  _mm256_load_si256(reinterpret_cast<const __m256i*>(rel)), 1);
  }
  // The low 16 bits of each lane (below 2^16: packus keeps them) to F32.
  static auto halves_lo(vi v) -> vf {
    v = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
  }
  static auto halves_hi(vi v) -> vf { return halves_lo(_mm256_srli_epi32(v, 16)); }
  static auto bcast(const void* p) -> vi {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static auto lookup16(vi table, vi idx) -> vi { return _mm256_shuffle_epi8(table, idx); } // bytes < 16
  static auto bcast16(const void* p) -> vi { return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  // Each lane's low byte e as MXFP4's scale in Q8_0: 2^(e - 128) for e
  // in F16's range (mxfp4::q8_0_min_e to q8_0_max_e), else 0 (mxfp4.hpp).
  static auto e8m0(vi e) -> vf {
    e = _mm256_and_si256(e, _mm256_set1_epi32(0xFF));
    const vi d = _mm256_sub_epi32(e, _mm256_set1_epi32(mxfp4::q8_0_min_e));
    const vi ok = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(mxfp4::q8_0_max_e - mxfp4::q8_0_min_e + 1), d),
                                   _mm256_cmpgt_epi32(d, _mm256_set1_epi32(-1)));
    return _mm256_castsi256_ps(_mm256_and_si256(ok, _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23)));
  }
  static auto set1(std::int32_t v) -> vi { return _mm256_set1_epi32(v); }
  static auto and_(vi a, vi b) -> vi { return _mm256_and_si256(a, b); }
  static auto or_(vi a, vi b) -> vi { return _mm256_or_si256(a, b); }
  static auto xor_(vi a, vi b) -> vi { return _mm256_xor_si256(a, b); }
  static auto merge(vi a, vi b, vi m) -> vi { return _mm256_or_si256(a, _mm256_and_si256(b, m)); }
  static auto shl(vi a, int n) -> vi { return _mm256_slli_epi32(a, n); }
  static auto shr(vi a, int n) -> vi { return _mm256_srli_epi32(a, n); }
  static auto sar(vi a, int n) -> vi { return _mm256_srai_epi32(a, n); }
  static auto add(vi a, vi b) -> vi { return _mm256_add_epi32(a, b); }
  static auto mullo(vi a, vi b) -> vi { return _mm256_mullo_epi32(a, b); }
  // Pairs of u8·s8 products fit int16 unsaturated while u <= 128 and
  // |s| <= 127 (x's bytes are in -127..127).
  static auto dot(vi acc, vi u, vi s) -> vi {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static auto abs8(vi a) -> vi { return _mm256_abs_epi8(a); }
  static auto dot_signed(vi acc, vi abs_w, vi w, vi s) -> vi { return dot(acc, abs_w, _mm256_sign_epi8(s, w)); }
  static auto cvt(vi a) -> vf { return _mm256_cvtepi32_ps(a); }
  static auto mul(vf a, vf b) -> vf { return _mm256_mul_ps(a, b); }
  static auto fma(vf a, vf b, vf c) -> vf { return _mm256_fmadd_ps(a, b, c); }
  static auto set1f(float v) -> vf { return _mm256_set1_ps(v); }
  static auto loadf(const float* p) -> vf { return _mm256_loadu_ps(p); }
  static void storef(float* p, vf v) { _mm256_storeu_ps(p, v); }
};

} // namespace
} // namespace troupe::quant

#include "engine/cpu/quant_tiles.hpp"

namespace troupe::quant {

auto avx2_kernels() -> const kernel_set& {
  static const kernel_set k = vector_kernels<avx2>("avx2");
  return k;
}

} // namespace troupe::quant

#pragma GCC pop_options
