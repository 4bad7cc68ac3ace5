// quant_gemm's kernels for AVX-512 with VNNI: 16 weight rows a tile, one
// vpdpbusd per 4 values of 16 rows and a row of x.

#include "engine/cpu/quant_kernels.hpp"
#include "engine/formats/mxfp4.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the merge source
// of their unmasked forms, which -W(maybe-)uninitialized reports after inlining.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace troupe::quant {
namespace {

using gguf::tensor_type;

struct avx512 {
  using vi = __m512i;
  using vf = __m512;
  static constexpr int R = 16;
  static constexpr bool vnni = true;
  // Rows of x a micro-kernel call carries: 8 for 32-value blocks (16
  // accumulators), 6 for K-quants (18).
  static constexpr int mr_small = 8, mr_k = 6;

  static auto load256(const std::byte* p) -> __m256i { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static auto load128(const std::byte* p) -> __m128i { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

  // In place: a 4×4 transpose of 32-bit elements in each 128-bit lane of
  // z[0..3] (element j of lane l of z[i] goes to element i of lane l of z[j]).
  static void transpose4x4(vi* z) {
    const vi t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const vi t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    z[0] = _mm512_unpacklo_epi64(t0, t2);
    z[1] = _mm512_unpackhi_epi64(t0, t2);
    z[2] = _mm512_unpacklo_epi64(t1, t3);
    z[3] = _mm512_unpackhi_epi64(t1, t3);
  }

  // 16 rows × 32 bytes: out[g] lane r = bytes 4g..4g+3 of row r. Rows r and
  // r + 4 share a register (rows 8 + r and 12 + r another), an 8×8
  // transpose of 32-bit elements runs in both 256-bit halves, and a
  // 128-bit shuffle puts the four row quads in order.
  static void transpose32(const std::byte* const* p, std::int64_t off, vi* out) {
    vi z[8];
    for (int q = 0; q < 4; ++q) {
      z[q] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(p[q] + off)), load256(p[q + 4] + off), 1);
      z[4 + q] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(p[8 + q] + off)), load256(p[12 + q] + off), 1);
    }
    transpose4x4(z);
    transpose4x4(z + 4);
    for (int g = 0; g < 4; ++g) {
      out[g] = _mm512_shuffle_i32x4(z[g], z[4 + g], _MM_SHUFFLE(2, 0, 2, 0));
      out[4 + g] = _mm512_shuffle_i32x4(z[g], z[4 + g], _MM_SHUFFLE(3, 1, 3, 1));
    }
  }

  // 16 rows × 16 bytes: out[g] lane r = bytes 4g..4g+3 of row r. Register q
  // holds rows q, q + 4, q + 8, q + 12; a 4×4 transpose in each 128-bit lane.
  static void transpose16(const std::byte* const* p, std::int64_t off, vi* out) {
    for (int q = 0; q < 4; ++q) {
      out[q] = _mm512_castsi128_si512(load128(p[q] + off));
      out[q] = _mm512_inserti32x4(out[q], load128(p[q + 4] + off), 1);
      out[q] = _mm512_inserti32x4(out[q], load128(p[q + 8] + off), 2);
      out[q] = _mm512_inserti32x4(out[q], load128(p[q + 12] + off), 3);
    }
    transpose4x4(out);
  }

  static auto gather(const std::byte* base, const std::int32_t* rel) -> vi {
    return _mm512_i32gather_epi32(_mm512_load_si512(rel), base, 1);
  }
  static auto halves_lo(vi v) -> vf { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }

  // One Q6_K row times one row of x (m = 1), row by row with no transpose:
  // each superblock's integer dot product Σ_s sc_s · (Σ q·x - 32 Σ x) is the
  // one k_block computes (integers: the same value), then the same float
  // chain acc = fma(d · dx, float(dot), acc) over the superblocks in order,
  // so the same bits. On Zen 4 the 16-row transposes made m = 1
  // compute-bound (7 GB/s on one thread over a 151,936-row head).
  static auto q6_k_row(const std::byte* w, const acts& a) -> float {
    const std::int64_t nb = a.k / 256;
    const vi low = _mm512_set1_epi8(0x0F);
    const __m256i three = _mm256_set1_epi8(0x03);
    // Lanes of 4 values to their sub-block's scale: values 64p..64p+63 of a
    // superblock are sub-blocks 4p..4p+3, four lanes each.
    const vi spread[4] = {_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                          _mm512_set_epi32(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4),
                          _mm512_set_epi32(11, 11, 11, 11, 10, 10, 10, 10, 9, 9, 9, 9, 8, 8, 8, 8),
                          _mm512_set_epi32(15, 15, 15, 15, 14, 14, 14, 14, 13, 13, 13, 13, 12, 12, 12, 12)};
    float acc = 0.0f;
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = w + b * 210;
      prefetch_ahead(blk, 210);
      const std::int8_t* x = a.q + 256 * b;
      const vi sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
      vi isum = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const vi l = _mm512_loadu_si512(blk + 64 * h);
        const __m256i qh = load256(blk + 128 + 32 * h);
        const __m256i h0 = _mm256_and_si256(qh, three), h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2), three);
        const __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(qh, 4), three);
        const __m256i h3 = _mm256_and_si256(_mm256_srli_epi16(qh, 6), three);
        const vi ha = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
        const vi hb = _mm512_inserti64x4(_mm512_castsi256_si512(h2), h3, 1);
        // Values 128h..128h+63, then 128h+64..128h+127, as unsigned 0..63.
        const vi qa = _mm512_or_si512(_mm512_and_si512(l, low), _mm512_slli_epi16(ha, 4));
        const vi qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low), _mm512_slli_epi16(hb, 4));
        const vi pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, _mm512_loadu_si512(x + 128 * h));
        const vi pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qb, _mm512_loadu_si512(x + 128 * h + 64));
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(pa, _mm512_permutexvar_epi32(spread[2 * h], sc)));
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(pb, _mm512_permutexvar_epi32(spread[2 * h + 1], sc)));
      }
      // Values stored plus 32: -32 · Σ x of each sub-block, times its scale.
      const vi neg = _mm512_loadu_si512(a.neg_sum16 + 16 * b);
      isum = _mm512_add_epi32(isum, _mm512_slli_epi32(_mm512_mullo_epi32(neg, sc), 5));
      const std::int32_t dot = _mm512_reduce_add_epi32(isum);
      acc = std::fma(f16_at(blk + 208) * a.d[b], static_cast<float>(dot), acc);
    }
    return acc;
  }
  // The lines of bytes [p + 4096, p + 4096 + n): a row kernel reads one
  // stream, asked for this far ahead of the hardware prefetcher. On Zen 4
  // (one thread, the 151,936-row head) Q6_K then read 21.5 GB/s from DRAM,
  // 17.9 without, Q4_K alike (1 KiB ahead: 18.9; 2 KiB: 20.0; 8 KiB: 21.0;
  // into L2 instead, 18.3). Always inlined, as tile_rows::prefetch.
  [[gnu::always_inline]] static void prefetch_ahead(const std::byte* p, std::int64_t n) {
    constexpr std::int64_t ahead = 4096;
    for (std::int64_t o = 0; o < n; o += 64) __builtin_prefetch(p + ahead + o, 0, 3);
  }

  static auto f16_at(const std::byte* p) -> float {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }

  // A Q4_K header's twelve bytes of 6-bit scales and mins (gguf::k_scale_min's
  // layout) as sixteen bytes: scales 0-7, then mins 0-7.
  static auto k_scales_mins(const std::byte* p) -> __m128i {
    constexpr std::uint32_t six = 0x3F3F3F3F, four = 0x0F0F0F0F, two = 0x03030303;
    std::uint32_t u[3];
    std::memcpy(u, p, 12);
    const std::uint32_t sc_hi = (u[2] & four) | (((u[0] >> 6) & two) << 4);
    const std::uint32_t mn_hi = ((u[2] >> 4) & four) | (((u[1] >> 6) & two) << 4);
    return _mm_set_epi32(static_cast<int>(mn_hi), static_cast<int>(u[1] & six), static_cast<int>(sc_hi),
                         static_cast<int>(u[0] & six));
  }

  // Superblock blk of a Q4_K row times x's (its 256 values at x, the
  // negated sums of its sub-blocks at neg): k_block's two integers, Σ_j sc_j
  // · Σ q·x into dot and Σ_j min_j · (-Σ x) into mins. Sub-block j's 32
  // products go to 8 lanes by vpdpbusd (each at most 4 · 15 · 128: an
  // int16), two sub-blocks' lanes are packed to int16 and multiplied by
  // their scales, in pairs, by vpdpwssd.
  static void q4_k_block(const std::byte* blk, const std::byte* x, const std::int16_t* neg, std::int32_t& dot,
                         std::int32_t& mins) {
    using v8 = __m256i;
    const v8 low = _mm256_set1_epi8(0x0F);
    const __m128i sm8 = k_scales_mins(blk + 4);
    const v8 sm = _mm256_broadcastsi128_si256(sm8);
    v8 acc = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) { // 32 bytes of qs: sub-blocks 2c (low nibbles) and 2c + 1
      const v8 v = load256(blk + 16 + 32 * c);
      const v8 pl = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_and_si256(v, low), load256(x + 64 * c));
      const v8 ph = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                                        load256(x + 64 * c + 32));
      // Scales 2c and 2c + 1 as int16, four lanes each, in both halves.
      const char s0 = static_cast<char>(2 * c), s1 = static_cast<char>(2 * c + 1), z = static_cast<char>(0x80);
      const v8 pick = _mm256_setr_epi8(s0, z, s0, z, s0, z, s0, z, s1, z, s1, z, s1, z, s1, z, s0, z, s0, z, s0, z,
                                       s0, z, s1, z, s1, z, s1, z, s1, z);
      acc = _mm256_dpwssd_epi32(acc, _mm256_packs_epi32(pl, ph), _mm256_shuffle_epi8(sm, pick));
    }
    // The mins and the sums as int16 pairs, as k_block's vpdpwssd.
    const __m128i m = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm8, sm8)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(neg)));
    const __m128i i4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    __m128i t = _mm_add_epi32(_mm_unpacklo_epi64(i4, m), _mm_unpackhi_epi64(i4, m));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    dot = _mm_cvtsi128_si32(t);
    mins = _mm_extract_epi32(t, 2);
  }

  // One Q4_K row times one row of x (m = 1): each superblock's integers
  // are k_block's, and so is the float chain over the superblocks in order
  // (acc = fma(d · dx, dot, acc); acc = fma(dmin · dx, mins, acc)): the
  // same bits.
  static auto q4_k_row(const std::byte* w, const acts& a) -> float {
    float acc = 0.0f;
    for (std::int64_t b = 0; b < a.k / 256; ++b) {
      const std::byte* blk = w + b * 144;
      prefetch_ahead(blk, 144);
      std::int32_t dot, mins;
      q4_k_block(blk, reinterpret_cast<const std::byte*>(a.q + 256 * b), a.neg_sum32_h + 8 * b, dot, mins);
      const float dx = a.d[b];
      acc = std::fma(f16_at(blk) * dx, static_cast<float>(dot), acc);
      acc = std::fma(f16_at(blk + 2) * dx, static_cast<float>(mins), acc);
    }
    return acc;
  }

  // Rows [0, nr) of w times one row of x (m = 1) into y[0, nr): the
  // K-quants, whose tiles are compute-bound at m = 1 on Zen 4 (Q4_K and
  // Q6_K from cache at 14 GB/s a thread, these rows at 19 and 25). Q8_0's
  // and MXFP4's tiles are not (34 and 17 GB/s): they keep them.
  template <tensor_type T>
    requires(T == tensor_type::q4_k || T == tensor_type::q6_k)
  static void rows(const std::byte* w, std::int64_t row_bytes, std::int64_t nr, const acts& a, float* y) {
    for (std::int64_t r = 0; r < nr; ++r)
      y[r] = T == tensor_type::q4_k ? q4_k_row(w + r * row_bytes, a) : q6_k_row(w + r * row_bytes, a);
  }

  static auto halves_hi(vi v) -> vf { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))); }
  static auto bcast(const void* p) -> vi {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static auto lookup16(vi table, vi idx) -> vi { return _mm512_shuffle_epi8(table, idx); } // bytes < 16
  static auto bcast16(const void* p) -> vi { return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  // Each lane's low byte e as MXFP4's scale in Q8_0: 2^(e - 128) for e
  // in F16's range (mxfp4::q8_0_min_e to q8_0_max_e), else 0 (mxfp4.hpp; an all-zero block's
  // product is 0 and adds nothing, whatever its scale, to a chain that
  // starts from +0: to_q8_0 writes d = 0 for it).
  static auto e8m0(vi e) -> vf {
    e = _mm512_and_si512(e, _mm512_set1_epi32(0xFF));
    const __mmask16 ok = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(e, _mm512_set1_epi32(mxfp4::q8_0_min_e)),
                                                 _mm512_set1_epi32(mxfp4::q8_0_max_e - mxfp4::q8_0_min_e + 1));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(ok, _mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23));
  }
  static auto set1(std::int32_t v) -> vi { return _mm512_set1_epi32(v); }
  static auto half_bcast(const void* p) -> vf { // the F16 at p, in every lane
    std::int16_t h;
    std::memcpy(&h, p, 2);
    return _mm512_cvtph_ps(_mm256_set1_epi16(h));
  }
  static auto load(const void* p) -> vi { return _mm512_loadu_si512(p); }
  static void store(void* p, vi v) { _mm512_storeu_si512(p, v); }
  static auto and_(vi a, vi b) -> vi { return _mm512_and_si512(a, b); }
  static auto or_(vi a, vi b) -> vi { return _mm512_or_si512(a, b); }
  static auto xor_(vi a, vi b) -> vi { return _mm512_xor_si512(a, b); }
  static auto merge(vi a, vi b, vi m) -> vi { return _mm512_ternarylogic_epi32(a, b, m, 0xF8); } // a | (b & m)
  static auto shl(vi a, int n) -> vi { return _mm512_slli_epi32(a, static_cast<unsigned>(n)); }
  static auto shr(vi a, int n) -> vi { return _mm512_srli_epi32(a, static_cast<unsigned>(n)); }
  static auto sar(vi a, int n) -> vi { return _mm512_srai_epi32(a, static_cast<unsigned>(n)); }
  static auto add(vi a, vi b) -> vi { return _mm512_add_epi32(a, b); }
  static auto sub(vi a, vi b) -> vi { return _mm512_sub_epi32(a, b); }
  static auto sub8(vi a, vi b) -> vi { return _mm512_sub_epi8(a, b); }
  static auto dotw(vi acc, vi a, vi b) -> vi { return _mm512_dpwssd_epi32(acc, a, b); } // acc + Σ2 s16·s16
  static auto mullo(vi a, vi b) -> vi { return _mm512_mullo_epi32(a, b); }
  static auto dot(vi acc, vi u, vi s) -> vi { return _mm512_dpbusd_epi32(acc, u, s); }
  static auto cvt(vi a) -> vf { return _mm512_cvtepi32_ps(a); }
  static auto mul(vf a, vf b) -> vf { return _mm512_mul_ps(a, b); }
  static auto fma(vf a, vf b, vf c) -> vf { return _mm512_fmadd_ps(a, b, c); }
  static auto set1f(float v) -> vf { return _mm512_set1_ps(v); }
  static auto loadf(const float* p) -> vf { return _mm512_loadu_ps(p); }
  // A 16 × 16 block transposed: dst[i · ldd + r] = src[r · lds + i] for
  // i < 16, r < n (n <= 16; src's rows past n are read, not stored).
  static void store_transposed(const float* src, std::int64_t lds, float* dst, std::int64_t ldd, std::int64_t n) {
    vf t[16], u[16];
    for (int r = 0; r < 16; r += 2) {
      const vf a = _mm512_loadu_ps(src + r * lds), b = _mm512_loadu_ps(src + (r + 1) * lds);
      t[r] = _mm512_unpacklo_ps(a, b); // per 128-bit lane L: a, b at 4L, 4L + 1
      t[r + 1] = _mm512_unpackhi_ps(a, b); // 4L + 2, 4L + 3
    }
    for (int q = 0; q < 4; ++q) { // rows 4q..4q+3: u[4q + f], lane L = element 4L + f of the four rows
      u[4 * q] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
      u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
      u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
      u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
    }
    const auto mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    for (int f = 0; f < 4; ++f) {
      const vf v0 = _mm512_shuffle_f32x4(u[f], u[4 + f], 0x88), v1 = _mm512_shuffle_f32x4(u[f], u[4 + f], 0xDD);
      const vf v2 = _mm512_shuffle_f32x4(u[8 + f], u[12 + f], 0x88), v3 = _mm512_shuffle_f32x4(u[8 + f], u[12 + f], 0xDD);
      _mm512_mask_storeu_ps(dst + f * ldd, mask, _mm512_shuffle_f32x4(v0, v2, 0x88));
      _mm512_mask_storeu_ps(dst + (8 + f) * ldd, mask, _mm512_shuffle_f32x4(v0, v2, 0xDD));
      _mm512_mask_storeu_ps(dst + (4 + f) * ldd, mask, _mm512_shuffle_f32x4(v1, v3, 0x88));
      _mm512_mask_storeu_ps(dst + (12 + f) * ldd, mask, _mm512_shuffle_f32x4(v1, v3, 0xDD));
    }
  }
  static void storef(float* p, vf v) { _mm512_storeu_ps(p, v); }
};

} // namespace
} // namespace troupe::quant

#include "engine/cpu/quant_batch_tiles.hpp"

namespace troupe::quant {

auto avx512_kernels() -> const kernel_set& {
  static const kernel_set k = with_batch_kernels<avx512>(vector_kernels<avx512>("avx512-vnni"));
  return k;
}

} // namespace troupe::quant

#pragma GCC diagnostic pop
#pragma GCC pop_options
