#pragma once
// The vector tile kernels of quant_gemm, written once over an ISA's vector
// operations V (quant_kernels_avx2.cpp includes this after its target
// pragma, quant_kernels_avx512.cpp through quant_batch_tiles.hpp; nothing
// else may).
//
// A tile is V::R weight rows (16 on AVX-512, 8 on AVX2). A chunk of their
// blocks is first rearranged into L1 (transposed: vector t holds values
// 4t..4t+3 of every row, lane r for row r, as unsigned bytes), with each
// row's scales in lanes alike; then up to MR rows of x run over the chunk,
// each x value group of 4 broadcast against a tile vector (vpdpbusd, or
// its AVX2 equivalent). The per-block integer sums come out per row in
// lanes, and each lane follows quant_gemm.hpp's float chain exactly.
//
// V provides: vi, vf, R, vnni; transpose32 (R rows × 32 bytes -> 8 vi),
// transpose16 (R rows × 16 bytes -> 4 vi), gather (4 bytes of each row),
// halves_lo/halves_hi (the low/high F16 of each lane -> vf), bcast
// (4 bytes to every lane), set1, and_, or_, merge (a | (b & m)), shl, shr,
// sar (32-bit lanes), add, mullo, dot (acc + Σ4 u8·s8, u8 <= 128), xor_,
// cvt, mul, fma, set1f, loadf, storef, mr_small and mr_k (rows of x a
// micro-kernel carries); without vnni also abs8 and dot_signed (acc +
// Σ4 s8·s8 from |w| and w); with vnni also sub, sub8 (bytes) and dotw
// (acc + Σ2 s16·s16), for the signed-weight batch path (decode_signed)
// and the K-quants' mins in int16 pairs.

#include "engine/cpu/quant_kernels.hpp"
#include "engine/formats/mxfp4.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

namespace troupe::quant {
namespace {

using gguf::tensor_type;

// Row pointers of a tile; past the last row (a partial tile) the last row
// repeats, its results unused.
template <int R>
struct tile_rows {
  const std::byte* p[R];
  alignas(64) std::int32_t rel[R]; // p[r] - p[0], for gathers
  std::int64_t row_bytes;

  tile_rows(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr) : row_bytes(row_bytes) {
    for (std::int64_t r = 0; r < R; ++r) {
      p[r] = w + (row0 + std::min(r, nr - 1)) * row_bytes;
      rel[r] = static_cast<std::int32_t>(std::min(r, nr - 1) * row_bytes);
    }
  }

  // Asks for slice b · parts + part of num_blocks · parts equal slices of
  // the next tile's bytes (rows are contiguous: the R rows after these; the
  // same thread's next tile under a static schedule; past the matrix,
  // nothing faults), into L2: called once a block (parts times, spread
  // over a K-quant's decode), it keeps the next tile streaming in, in
  // order, while this one is multiplied. On Zen 4 this replaced a prefetch
  // into L1 of the block 1 KiB ahead in each of the 16 rows (tuned on an
  // Intel machine), whose 16 streams held m = 1 on Q8_0 to 13.5 GB/s from
  // DRAM (one thread, a 151,936 x 2048 head); now 28.4 (k = 2880), MXFP4
  // 16.3, and at m = 2 Q4_K and Q6_K 12.3 (were 9.1 and 7.4), at m = 16 4.2
  // and 5.1 (3.6, 3.9). Into L1 the same slices read Q8_0 at 11.7. Always
  // inlined: GCC 12 finds a function of prefetches alone free of side
  // effects and drops its calls.
  [[gnu::always_inline]] void prefetch(std::int64_t b, std::int64_t num_blocks, int part = 0, int parts = 1) const {
    const std::int64_t tile = R * row_bytes, slice = (tile + num_blocks * parts - 1) / (num_blocks * parts);
    const std::byte* next = p[0] + tile + (b * parts + part) * slice;
    for (std::int64_t o = 0; o < slice; o += 64) __builtin_prefetch(next + o, 0, 1);
  }
};

// Every row's F16 at byte off, as F32: one gather of the 4 bytes from off
// (or, when off + 4 would leave the block, up to off + 2).
template <class V>
auto halves_at(const tile_rows<V::R>& rows, std::int64_t off, bool at_block_end) -> typename V::vf {
  if (at_block_end) return V::halves_hi(V::gather(rows.p[0] + off - 2, rows.rel));
  return V::halves_lo(V::gather(rows.p[0] + off, rows.rel));
}

// MXFP4's code values (mxfp4::values) plus 16: unsigned, at most 28.
alignas(16) constexpr auto mxfp4_plus16 = [] {
  std::array<std::int8_t, 16> t{};
  for (int c = 0; c < 16; ++c) t[c] = static_cast<std::int8_t>(mxfp4::values[c] + 16);
  return t;
}();

// Blocks per chunk: the rearranged chunk (16 KiB of values on AVX-512)
// stays in L1 while every row of x passes over it.
constexpr std::int64_t chunk_small = 32, chunk_k = 4;

// ---- Q8_0, Q4_0 and MXFP4: blocks of 32, one scale (MXFP4: multiplied
// as the Q8_0 block it equals, mxfp4.hpp).

template <class V, tensor_type T>
struct small_format {
  static constexpr std::int64_t block_bytes = T == tensor_type::q8_0 ? 34 : T == tensor_type::mxfp4 ? 17 : 18;
  // Q8_0 without VNNI keeps the signed bytes (and their magnitudes): 255
  // times 127 twice would saturate vpmaddubsw.
  static constexpr bool signed_w = T == tensor_type::q8_0 && !V::vnni;
  // Otherwise the bytes are unsigned, value + 128 (Q8_0), value + 8 (Q4_0)
  // or value + 16 (MXFP4's, at most 12 in magnitude), and the dot product
  // starts from -offset · Σ q.
  static constexpr int offset_shift = T == tensor_type::q8_0 ? 7 : T == tensor_type::mxfp4 ? 4 : 3;

  // Block b's scale in every row, as F32: Q8_0's and Q4_0's F16; MXFP4's
  // byte e as the Q8_0 scale it converts to (V::e8m0).
  static auto scale(const tile_rows<V::R>& rows, std::int64_t b) -> typename V::vf {
    if constexpr (T == tensor_type::mxfp4)
      return V::e8m0(V::gather(rows.p[0] + b * block_bytes, rows.rel));
    else
      return halves_at<V>(rows, b * block_bytes, false);
  }

  // The scale of the block at blk (one row's) in every lane.
  static auto bcast_scale(const std::byte* blk) -> typename V::vf {
    if constexpr (T == tensor_type::mxfp4)
      return V::e8m0(V::set1(static_cast<std::int32_t>(blk[0])));
    else
      return V::half_bcast(blk);
  }

  // Block b of the tile's rows into t[8] (and s[8]: the signed bytes).
  static void decode(const tile_rows<V::R>& rows, std::int64_t b, typename V::vi* t, typename V::vi* s) {
    using vi = typename V::vi;
    if constexpr (T == tensor_type::q8_0) {
      vi raw[8];
      V::transpose32(rows.p, b * block_bytes + 2, raw);
      for (int g = 0; g < 8; ++g) {
        if constexpr (signed_w) {
          t[g] = V::abs8(raw[g]);
          s[g] = raw[g];
        } else {
          t[g] = V::xor_(raw[g], V::set1(static_cast<std::int32_t>(0x80808080u)));
        }
      }
    } else {
      // Byte i: code i in the low nibble, code i + 16 in the high (Q4_0's
      // value + 8; MXFP4's an index into its table of values + 16).
      vi raw[4];
      V::transpose16(rows.p, b * block_bytes + (T == tensor_type::mxfp4 ? 1 : 2), raw);
      const vi low = V::set1(0x0F0F0F0F);
      for (int g = 0; g < 4; ++g) {
        t[g] = V::and_(raw[g], low);
        t[4 + g] = V::and_(V::shr(raw[g], 4), low);
      }
      if constexpr (T == tensor_type::mxfp4) {
        const vi table = V::bcast16(mxfp4_plus16.data());
        for (int g = 0; g < 8; ++g) t[g] = V::lookup16(table, t[g]);
      }
    }
  }
};

// Σ over vectors t[0..n) of each lane's four signed bytes.
template <class V>
auto byte_sums(const typename V::vi* t, int n) -> typename V::vi {
  const auto ones = V::set1(0x01010101);
  auto s = V::set1(0);
  for (int g = 0; g < n; ++g) s = V::dot(s, ones, t[g]);
  return s;
}

// With VNNI, a batch past the fused path multiplies x as unsigned bytes
// (u = q + 128) by signed weights (Q8_0's own bytes, Q4_0's less 8):
// Σ u·w = Σ q·w + 128 Σ w, and the correction -128 Σ w is the weights',
// taken once per decoded block for every row of x, where the unsigned
// weights' correction (-offset · Σ q) cost each row of x two operations.
// Block b as signed bytes into t[8]; returns -128 Σ w per row.
template <class V, tensor_type T>
auto decode_signed(const tile_rows<V::R>& rows, std::int64_t b, typename V::vi* t) -> typename V::vi {
  if constexpr (T == tensor_type::q8_0) {
    V::transpose32(rows.p, b * small_format<V, T>::block_bytes + 2, t);
  } else {
    small_format<V, T>::decode(rows, b, t, nullptr);
    for (int g = 0; g < 8; ++g) t[g] = V::sub8(t[g], V::set1(0x01010101 << small_format<V, T>::offset_shift));
  }
  return V::sub(V::set1(0), V::shl(byte_sums<V>(t, 8), 7));
}

// Block b, decoded (t, sg, scale), times MR rows of x from i0 into f.
// Signed: t from decode_signed, *sg its correction, x read as u.
template <class V, tensor_type T, int MR, bool Signed = false>
[[gnu::always_inline]] inline void small_block(const typename V::vi* t, const typename V::vi* sg,
                                               typename V::vf scale, std::int64_t b, const acts& a, std::int64_t i0,
                                               typename V::vf* f) {
  using F = small_format<V, T>;
  using vi = typename V::vi;
  const std::int64_t nb = a.k / 32;
  vi s[MR];
  for (int ii = 0; ii < MR; ++ii) {
    if constexpr (Signed)
      s[ii] = *sg;
    else if constexpr (F::signed_w)
      s[ii] = V::set1(0);
    else
      s[ii] = V::shl(V::bcast(a.neg_sum32 + (i0 + ii) * nb + b), F::offset_shift);
  }
  const auto* q = static_cast<const std::byte*>(Signed ? static_cast<const void*>(a.u) : a.q) + i0 * a.k + 32 * b;
  // One row of x: two chains of four products (the sum is exact either
  // way), or the eight would wait on each other's latency.
  constexpr int chains = MR == 1 ? 2 : 1;
  vi s2[MR];
  for (int ii = 0; ii < MR; ++ii) s2[ii] = V::set1(0);
  for (int g = 0; g < 8; ++g)
    for (int ii = 0; ii < MR; ++ii) {
      const vi xv = V::bcast(q + ii * a.k + 4 * g);
      vi& acc = chains == 2 && g % 2 == 1 ? s2[ii] : s[ii];
      if constexpr (Signed)
        acc = V::dot(acc, xv, t[g]);
      else if constexpr (F::signed_w)
        acc = V::dot_signed(acc, t[g], sg[g], xv);
      else
        acc = V::dot(acc, t[g], xv);
    }
  if constexpr (chains == 2)
    for (int ii = 0; ii < MR; ++ii) s[ii] = V::add(s[ii], s2[ii]);
  for (int ii = 0; ii < MR; ++ii)
    f[ii] = V::fma(V::mul(scale, V::set1f(a.d[(i0 + ii) * nb + b])), V::cvt(s[ii]), f[ii]);
}

// MR rows of x from i0 over a decoded chunk of nc blocks from b0; acc
// holds their running sums ([m, R]).
template <class V, tensor_type T, int MR>
[[gnu::noinline]] void small_rows(const typename V::vi* tiles, const typename V::vi* signs,
                                  const typename V::vf* scales, std::int64_t b0, std::int64_t nc, const acts& a,
                                  std::int64_t i0, float* acc) {
  typename V::vf f[MR];
  for (int ii = 0; ii < MR; ++ii) f[ii] = V::loadf(acc + (i0 + ii) * V::R);
  for (std::int64_t c = 0; c < nc; ++c) {
    // On VNNI, signs holds decode_signed's corrections, one a block.
    if constexpr (V::vnni)
      small_block<V, T, MR, true>(tiles + 8 * c, signs + c, scales[c], b0 + c, a, i0, f);
    else
      small_block<V, T, MR>(tiles + 8 * c, signs + 8 * c, scales[c], b0 + c, a, i0, f);
  }
  for (int ii = 0; ii < MR; ++ii) V::storef(acc + (i0 + ii) * V::R, f[ii]);
}

// All m = MR rows of x at once (decode, small batches): each block is
// multiplied as soon as it is decoded, in registers, never stored.
template <class V, tensor_type T, int MR>
[[gnu::noinline]] void small_fused(const tile_rows<V::R>& rows, const acts& a, float* acc) {
  using F = small_format<V, T>;
  const std::int64_t nb = a.k / 32;
  typename V::vf f[MR];
  for (int ii = 0; ii < MR; ++ii) f[ii] = V::set1f(0.0f);
  for (std::int64_t b = 0; b < nb; ++b) {
    rows.prefetch(b, nb);
    typename V::vi t[8], sg[8];
    const auto scale = F::scale(rows, b);
    F::decode(rows, b, t, sg);
    small_block<V, T, MR>(t, sg, scale, b, a, 0, f);
  }
  for (int ii = 0; ii < MR; ++ii) V::storef(acc + ii * V::R, f[ii]);
}

// Calls Rows<MR> for the rows of x from i0, MR at a time, the rest in one
// narrower call.
template <int MR, class Rows>
void over_rows(std::int64_t m, Rows&& rows) {
  std::int64_t i0 = 0;
  for (; i0 + MR <= m; i0 += MR) rows.template operator()<MR>(i0);
  if (i0 == m) return;
  [&]<int... N>(std::integer_sequence<int, N...>) {
    ((m - i0 == N + 1 ? (rows.template operator()<N + 1>(i0), 0) : 0), ...);
  }(std::make_integer_sequence<int, MR - 1>{});
}

template <class V>
auto zeroed_acc(std::int64_t m) -> float* {
  auto* acc = reinterpret_cast<float*>(scratch(2, static_cast<std::size_t>(m * V::R) * sizeof(float)));
  std::fill(acc, acc + m * V::R, 0.0f);
  return acc;
}

template <class V>
void store_rows(const float* acc, std::int64_t m, std::int64_t row0, std::int64_t nr, float* y, std::int64_t ldy) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t r = 0; r < nr; ++r) y[i * ldy + row0 + r] = acc[i * V::R + r];
}

// m = 1 where the ISA has a row kernel for T (AVX-512: Q4_K, Q6_K): each
// row read once, straight, with no transpose, and the same integers and
// float chain as the tiles, so the same bits. On Zen 4 these tiles'
// transposes and decode made m = 1 compute-bound (one thread, a
// 151,936-row head: Q6_K 7 GB/s, Q4_K 9; now 21.9 and 18.2). Whether it ran.
template <class V, tensor_type T>
auto by_rows(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, const acts& a, float* y)
    -> bool {
  if constexpr (requires { V::template rows<T>(w, row_bytes, nr, a, y); }) {
    if (a.m != 1) return false;
    V::template rows<T>(w + row0 * row_bytes, row_bytes, nr, a, y + row0);
    return true;
  }
  return false;
}

template <class V, tensor_type T>
void small_tile(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, const acts& a,
                float* y, std::int64_t ldy) {
  using F = small_format<V, T>;
  using vi = typename V::vi;
  using vf = typename V::vf;
  const tile_rows<V::R> rows(w, row_bytes, row0, nr);
  const std::int64_t nb = a.k / 32;
  // Values, and per block 8 signs (Q8_0 without VNNI) or a correction (VNNI).
  constexpr std::int64_t per_block = F::signed_w ? 16 : V::vnni ? 9 : 8;
  auto* buf = scratch(3, static_cast<std::size_t>(chunk_small) * (per_block * sizeof(vi) + sizeof(vf)));
  auto* tiles = reinterpret_cast<vi*>(buf);
  auto* signs = tiles + 8 * chunk_small;
  auto* scales = reinterpret_cast<vf*>(buf + chunk_small * per_block * sizeof(vi));
  if (a.m <= V::mr_small) {
    auto* acc = reinterpret_cast<float*>(scratch(2, static_cast<std::size_t>(a.m * V::R) * sizeof(float)));
    over_rows<V::mr_small>(a.m, [&]<int MR>(std::int64_t) { small_fused<V, T, MR>(rows, a, acc); });
    store_rows<V>(acc, a.m, row0, nr, y, ldy);
    return;
  }
  float* acc = zeroed_acc<V>(a.m);
  for (std::int64_t b0 = 0; b0 < nb; b0 += chunk_small) {
    const std::int64_t nc = std::min(chunk_small, nb - b0);
    for (std::int64_t c = 0; c < nc; ++c) {
      rows.prefetch(b0 + c, nb);
      scales[c] = F::scale(rows, b0 + c);
      if constexpr (V::vnni)
        signs[c] = decode_signed<V, T>(rows, b0 + c, tiles + 8 * c);
      else
        F::decode(rows, b0 + c, tiles + 8 * c, signs + 8 * c);
    }
    over_rows<V::mr_small>(a.m, [&]<int MR>(std::int64_t i0) {
      small_rows<V, T, MR>(tiles, signs, scales, b0, nc, a, i0, acc);
    });
  }
  store_rows<V>(acc, a.m, row0, nr, y, ldy);
}

// ---- K-quants: superblocks of 256 values in sub-blocks with integer scales.

template <class V, tensor_type T>
struct k_format {
  static constexpr std::int64_t block_bytes = T == tensor_type::q4_k ? 144 : T == tensor_type::q5_k ? 176 : 210;
  static constexpr int num_sub = T == tensor_type::q6_k ? 16 : 8; // sub-blocks of 16 or 32 values
  static constexpr bool mins = T != tensor_type::q6_k;

  // A Q4_K/Q5_K header: d, dmin, then 12 bytes of packed 6-bit scales and
  // mins (gguf::k_scale_min's layout, here on 32-bit lanes of 4 bytes).
  // Returns d; dmin into dmin.
  static auto decode_scales(const tile_rows<V::R>& rows, std::int64_t off, typename V::vi* sc, typename V::vi* mn,
                            typename V::vf& dmin) -> typename V::vf {
    using vi = typename V::vi;
    vi h[4];
    V::transpose16(rows.p, off, h);
    dmin = V::halves_hi(h[0]);
    const vi m63 = V::set1(63), m15 = V::set1(15), m3 = V::set1(3);
    for (int j = 0; j < 4; ++j) {
      sc[j] = V::and_(V::shr(h[1], 8 * j), m63);
      mn[j] = V::and_(V::shr(h[2], 8 * j), m63);
      sc[4 + j] = V::or_(V::and_(V::shr(h[3], 8 * j), m15), V::shl(V::and_(V::shr(h[1], 8 * j + 6), m3), 4));
      mn[4 + j] = V::or_(V::and_(V::shr(h[3], 8 * j + 4), m15), V::shl(V::and_(V::shr(h[2], 8 * j + 6), m3), 4));
    }
    return V::halves_lo(h[0]);
  }

  // Bit s of each qh byte moved to bit 4, the value's fifth bit (other
  // bits are masked off later). A function, not a lambda: GCC does not
  // give lambdas the target pragma of the code around them.
  static auto fifth(typename V::vi qh, int s) -> typename V::vi { return s <= 4 ? V::shl(qh, 4 - s) : V::shr(qh, s - 4); }

  // Mins 2q and 2q + 1 as an int16 pair per lane, for vpdpwssd (q < 4).
  static auto min_pair(const typename V::vi* mn, int q) -> typename V::vi {
    return V::or_(mn[2 * q], V::shl(mn[2 * q + 1], 16));
  }

  // Superblock b's scales alone: sc[num_sub], mn[8] (Q4_K, Q5_K), d, dmin.
  static void header(const tile_rows<V::R>& rows, std::int64_t b, typename V::vi* sc, typename V::vi* mn,
                     typename V::vf& d, typename V::vf& dmin) {
    const std::int64_t off = b * block_bytes;
    if constexpr (mins) {
      d = decode_scales(rows, off, sc, mn, dmin);
    } else {
      d = halves_at<V>(rows, off + 208, true);
      // Sixteen int8 scales: four bytes a lane, sign-extended.
      typename V::vi s[4];
      V::transpose16(rows.p, off + 192, s);
      for (int j = 0; j < 16; ++j) sc[j] = V::sar(V::shl(s[j / 4], 24 - 8 * (j % 4)), 24);
    }
  }

  // Superblock b of nb into t[64] (vector v: values 4v..4v+3), the
  // sub-block scales sc[num_sub], mins mn[8], d and dmin; prefetches the
  // block 1 KiB ahead on the way.
  static void decode(const tile_rows<V::R>& rows, std::int64_t b, std::int64_t nb, typename V::vi* t,
                     typename V::vi* sc, typename V::vi* mn, typename V::vf& d, typename V::vf& dmin) {
    using vi = typename V::vi;
    const std::int64_t off = b * block_bytes;
    const vi low = V::set1(0x0F0F0F0F);
    header(rows, b, sc, mn, d, dmin);
    if constexpr (T == tensor_type::q4_k || T == tensor_type::q5_k) {
      constexpr bool five = T == tensor_type::q5_k;
      vi qh[8];
      if constexpr (five) V::transpose32(rows.p, off + 16, qh);
      const vi bit4 = V::set1(0x10101010);
      for (int c = 0; c < 4; ++c) {
        vi qs[8];
        rows.prefetch(b, nb, c, 4);
        V::transpose32(rows.p, off + (five ? 48 : 16) + 32 * c, qs);
        // Values 64c..64c+31: the low nibbles; 64c+32..64c+63: the high.
        for (int g = 0; g < 8; ++g) {
          vi lo = V::and_(qs[g], low), hi = V::and_(V::shr(qs[g], 4), low);
          if constexpr (five) {
            lo = V::merge(lo, fifth(qh[g], 2 * c), bit4);
            hi = V::merge(hi, fifth(qh[g], 2 * c + 1), bit4);
          }
          t[16 * c + g] = lo;
          t[16 * c + 8 + g] = hi;
        }
      }
    } else {
      const vi bits45 = V::set1(0x30303030);
      for (int h = 0; h < 2; ++h) {
        // ql[64h + l] and ql[64h + 32 + l], qh[32h + l]: four values 32 apart.
        vi la[8], lb[8], qh[8];
        rows.prefetch(b, nb, 2 * h, 4);
        V::transpose32(rows.p, off + 64 * h, la);
        rows.prefetch(b, nb, 2 * h + 1, 4);
        V::transpose32(rows.p, off + 64 * h + 32, lb);
        V::transpose32(rows.p, off + 128 + 32 * h, qh);
        for (int g = 0; g < 8; ++g) {
          t[32 * h + g] = V::merge(V::and_(la[g], low), V::shl(qh[g], 4), bits45);
          t[32 * h + 8 + g] = V::merge(V::and_(lb[g], low), V::shl(qh[g], 2), bits45);
          t[32 * h + 16 + g] = V::merge(V::and_(V::shr(la[g], 4), low), qh[g], bits45);
          t[32 * h + 24 + g] = V::merge(V::and_(V::shr(lb[g], 4), low), V::shr(qh[g], 2), bits45);
        }
      }
    }
  }
};

// The per-superblock state of a decoded K chunk, in one scratch buffer.
template <class V, tensor_type T>
struct k_chunk {
  using F = k_format<V, T>;
  typename V::vi* t;    // [chunk_k][64]
  typename V::vi* sc;   // [chunk_k][num_sub]
  typename V::vi* mn;   // [chunk_k][8]
  typename V::vf* d;    // [chunk_k]
  typename V::vf* dmin; // [chunk_k]

  k_chunk() {
    using vi = typename V::vi;
    using vf = typename V::vf;
    auto* p = scratch(3, static_cast<std::size_t>(chunk_k) * ((64 + F::num_sub + 8) * sizeof(vi) + 2 * sizeof(vf)));
    t = reinterpret_cast<vi*>(p);
    sc = t + 64 * chunk_k;
    mn = sc + F::num_sub * chunk_k;
    d = reinterpret_cast<vf*>(mn + 8 * chunk_k);
    dmin = d + chunk_k;
  }
};

// Superblock b, decoded (t[64], sc, mn, d, dmin), times MR rows of x from
// i0 into f.
template <class V, tensor_type T, int MR>
[[gnu::always_inline]] inline void k_block(const typename V::vi* t, const typename V::vi* sc, const typename V::vi* mn,
                                           typename V::vf d, typename V::vf dmin, std::int64_t b, const acts& a,
                                           std::int64_t i0, typename V::vf* f) {
  using F = k_format<V, T>;
  using vi = typename V::vi;
  constexpr int groups = 64 / F::num_sub; // vectors of 4 values per sub-block
  const std::int8_t* q = a.q + i0 * a.k + 256 * b;
  vi isum[MR];
  for (int ii = 0; ii < MR; ++ii) isum[ii] = V::set1(0);
  for (int s = 0; s < F::num_sub; ++s) {
    vi p[MR];
    for (int ii = 0; ii < MR; ++ii) {
      // Q6_K's values are stored plus 32: start from -32 · Σ q.
      if constexpr (F::mins)
        p[ii] = V::set1(0);
      else
        p[ii] = V::shl(V::bcast(a.neg_sum16 + (i0 + ii) * (a.k / 16) + 16 * b + s), 5);
    }
    for (int g = 0; g < groups; ++g)
      for (int ii = 0; ii < MR; ++ii)
        p[ii] = V::dot(p[ii], t[groups * s + g], V::bcast(q + ii * a.k + 4 * (groups * s + g)));
    for (int ii = 0; ii < MR; ++ii) isum[ii] = V::add(isum[ii], V::mullo(p[ii], sc[s]));
  }
  // On VNNI the mins go to vpdpwssd as int16 pairs (mins 2p, 2p + 1). Paired
  // here, once per call: in decode the pairing slowed m = 1 by 7%.
  [[maybe_unused]] vi mnp[4];
  if constexpr (F::mins && V::vnni)
    for (int p = 0; p < 4; ++p) mnp[p] = F::min_pair(mn, p);
  for (int ii = 0; ii < MR; ++ii) {
    const auto dx = V::set1f(a.d[(i0 + ii) * (a.k / 256) + b]);
    f[ii] = V::fma(V::mul(d, dx), V::cvt(isum[ii]), f[ii]);
    if constexpr (F::mins) {
      vi msum;
      if constexpr (V::vnni) {
        // Mins and sums as int16 pairs (mins <= 63, |Σ| <= 4064): four
        // vpdpwssd for the eight products.
        const std::int16_t* neg = a.neg_sum32_h + (i0 + ii) * (a.k / 32) + 8 * b;
        msum = V::dotw(V::set1(0), mnp[0], V::bcast(neg));
        for (int p = 1; p < 4; ++p) msum = V::dotw(msum, mnp[p], V::bcast(neg + 2 * p));
      } else {
        const std::int32_t* neg = a.neg_sum32 + (i0 + ii) * (a.k / 32) + 8 * b;
        msum = V::mullo(mn[0], V::bcast(neg));
        for (int j = 1; j < 8; ++j) msum = V::add(msum, V::mullo(mn[j], V::bcast(neg + j)));
      }
      f[ii] = V::fma(V::mul(dmin, dx), V::cvt(msum), f[ii]);
    }
  }
}

template <class V, tensor_type T, int MR>
[[gnu::noinline]] void k_rows(const k_chunk<V, T>& ch, std::int64_t b0, std::int64_t nc, const acts& a,
                              std::int64_t i0, float* acc) {
  using F = k_format<V, T>;
  typename V::vf f[MR];
  for (int ii = 0; ii < MR; ++ii) f[ii] = V::loadf(acc + (i0 + ii) * V::R);
  for (std::int64_t c = 0; c < nc; ++c)
    k_block<V, T, MR>(ch.t + 64 * c, ch.sc + F::num_sub * c, ch.mn + 8 * c, ch.d[c], ch.dmin[c], b0 + c, a, i0, f);
  for (int ii = 0; ii < MR; ++ii) V::storef(acc + (i0 + ii) * V::R, f[ii]);
}

// small_fused's K-quant twin: m = MR, every superblock used as decoded.
template <class V, tensor_type T, int MR>
[[gnu::noinline]] void k_fused(const tile_rows<V::R>& rows, const acts& a, float* acc) {
  using F = k_format<V, T>;
  const std::int64_t nb = a.k / 256;
  typename V::vf f[MR];
  for (int ii = 0; ii < MR; ++ii) f[ii] = V::set1f(0.0f);
  for (std::int64_t b = 0; b < nb; ++b) {
    typename V::vi t[64], sc[F::num_sub], mn[8];
    typename V::vf d, dmin;
    F::decode(rows, b, nb, t, sc, mn, d, dmin);
    k_block<V, T, MR>(t, sc, mn, d, dmin, b, a, 0, f);
  }
  for (int ii = 0; ii < MR; ++ii) V::storef(acc + ii * V::R, f[ii]);
}

template <class V, tensor_type T>
void k_tile(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, const acts& a, float* y,
            std::int64_t ldy) {
  using F = k_format<V, T>;
  if (by_rows<V, T>(w, row_bytes, row0, nr, a, y)) return;
  const tile_rows<V::R> rows(w, row_bytes, row0, nr);
  if (a.m <= V::mr_k) {
    auto* acc = reinterpret_cast<float*>(scratch(2, static_cast<std::size_t>(a.m * V::R) * sizeof(float)));
    over_rows<V::mr_k>(a.m, [&]<int MR>(std::int64_t) { k_fused<V, T, MR>(rows, a, acc); });
    store_rows<V>(acc, a.m, row0, nr, y, ldy);
    return;
  }
  const std::int64_t nb = a.k / 256;
  const k_chunk<V, T> ch;
  float* acc = zeroed_acc<V>(a.m);
  for (std::int64_t b0 = 0; b0 < nb; b0 += chunk_k) {
    const std::int64_t nc = std::min(chunk_k, nb - b0);
    for (std::int64_t c = 0; c < nc; ++c) {
      F::decode(rows, b0 + c, nb, ch.t + 64 * c, ch.sc + F::num_sub * c, ch.mn + 8 * c, ch.d[c], ch.dmin[c]);
    }
    over_rows<V::mr_k>(a.m, [&]<int MR>(std::int64_t i0) { k_rows<V, T, MR>(ch, b0, nc, a, i0, acc); });
  }
  store_rows<V>(acc, a.m, row0, nr, y, ldy);
}

template <class V>
auto vector_kernels(std::string_view name) -> kernel_set {
  return {name,
          V::R,
          small_tile<V, tensor_type::q8_0>,
          small_tile<V, tensor_type::q4_0>,
          k_tile<V, tensor_type::q4_k>,
          k_tile<V, tensor_type::q5_k>,
          k_tile<V, tensor_type::q6_k>,
          small_tile<V, tensor_type::mxfp4>,
          V::vnni,
          V::mr_small};
}

} // namespace
} // namespace troupe::quant
