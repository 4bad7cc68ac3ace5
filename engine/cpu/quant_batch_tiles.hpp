#pragma once
// quant_gemm's batch kernels on VNNI, for m a multiple of 32: rows of x in
// the lanes, weights broadcast (quant_kernels_avx512.cpp includes this,
// and through it quant_tiles.hpp, after its target pragma; nothing else
// may).
//
// quant_tiles.hpp's kernels hold 16 weight rows in a vector's lanes and
// broadcast x: 9 loads for 8 vpdpbusd (a weight vector, 8 rows of x). Here
// x, quantized once per call, is stored transposed in slabs of 32 rows
// (acts::qt: vector j of a slab holds values 4j..4j+3 of 16 rows, a row a
// lane), and a micro-kernel multiplies 6 weight rows, each 4-byte group
// broadcast, by the slab's 2 vectors: 8 loads for 12 vpdpbusd. Measured
// here, one core, data in L1, a pure loop of vpdpbusd with the K-quants'
// scale multiplies: 6 weight rows x 2 vectors 504 GMAC/s, 8 rows of x
// against one weight vector 443. Q8_0 is read in place (its bytes flipped
// to unsigned as broadcast); the values of Q4_0 and the K-quants are
// decoded row by row, without transposes (the K-quants' scales, 16 rows at
// a time, with quant_tiles.hpp's header decode). A call takes 48 weight rows and prefetches each
// micro-kernel's rows of the next chunk as it goes: 288 prefetches at once
// were more than the core keeps in flight (from DRAM, Q8_0 ran 200 GMAC/s
// so, 292 spread).
//
// V provides, beyond quant_tiles.hpp's operations: load and store (a vector
// of int32), half_bcast (an F16 to every lane) and store_transposed (a
// 16 × 16 block of floats, transposed).
//
// The integer sums are quant_gemm.hpp's, and every lane follows the same
// float chain (the same operands, in the same order), so each output has
// the bits of the other kernels.

#include "engine/cpu/quant_tiles.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace troupe::quant {
namespace {

using u8x32 = std::uint8_t __attribute__((vector_size(32)));
using u8x16 = std::uint8_t __attribute__((vector_size(16)));

template <class U>
auto load_bytes(const std::byte* p) -> U {
  U v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class U>
void store_bytes(std::uint8_t* p, U v) {
  std::memcpy(p, &v, sizeof v);
}

// One weight row's block at src as unsigned bytes in the order of its
// values: Q4_0 and the K-quants their stored codes (the offsets of Q4_0 and
// Q6_K are x's corrections, as in quant_tiles). Q8_0 is used in place.
template <tensor_type T>
void decode_row(const std::byte* src, std::uint8_t* dst) {
  if constexpr (T == tensor_type::q4_0) {
    const auto v = load_bytes<u8x16>(src + 2);
    store_bytes(dst, v & 15);
    store_bytes(dst + 16, v >> 4);
  } else if constexpr (T == tensor_type::mxfp4) { // values + 16, as quant_tiles
    const auto v = load_bytes<u8x16>(src + 1);
    const auto table = load_bytes<u8x16>(reinterpret_cast<const std::byte*>(mxfp4_plus16.data()));
    store_bytes(dst, __builtin_shuffle(table, v & 15));
    store_bytes(dst + 16, __builtin_shuffle(table, v >> 4));
  } else if constexpr (T == tensor_type::q4_k || T == tensor_type::q5_k) {
    constexpr bool five = T == tensor_type::q5_k;
    u8x32 qh{};
    if constexpr (five) qh = load_bytes<u8x32>(src + 16);
    for (int c = 0; c < 4; ++c) {
      const auto v = load_bytes<u8x32>(src + (five ? 48 : 16) + 32 * c);
      u8x32 lo = v & 15, hi = v >> 4;
      if constexpr (five) {
        lo |= ((qh >> (2 * c)) & 1) << 4;
        hi |= ((qh >> (2 * c + 1)) & 1) << 4;
      }
      store_bytes(dst + 64 * c, lo);
      store_bytes(dst + 64 * c + 32, hi);
    }
  } else {
    for (int h = 0; h < 2; ++h) {
      const auto la = load_bytes<u8x32>(src + 64 * h), lb = load_bytes<u8x32>(src + 64 * h + 32);
      const auto qh = load_bytes<u8x32>(src + 128 + 32 * h);
      std::uint8_t* d = dst + 128 * h;
      store_bytes(d, (la & 15) | ((qh & 3) << 4));
      store_bytes(d + 32, (lb & 15) | (((qh >> 2) & 3) << 4));
      store_bytes(d + 64, (la >> 4) | (((qh >> 4) & 3) << 4));
      store_bytes(d + 96, (lb >> 4) | (((qh >> 6) & 3) << 4));
    }
  }
}

// Values a chunk holds per row (8 blocks of 32, or a superblock), and the
// rows of x a slab holds (two vectors).
constexpr std::int64_t chunk_t = 256, slab = batch_slab;
// Weight rows a micro-kernel call carries at most.
constexpr int nr_t = 6;
// Weight rows a batch kernel call takes (kernel_set::batch_rows): three
// tiles of V::R, eight micro-kernel calls of nr_t.
template <class V>
constexpr std::int64_t batch_rows = 3 * V::R;


// Vector mx of slab v0's lanes at column j of a transposed array of acts
// with `columns` columns.
template <class V>
auto x_at(const void* p, std::int64_t v0, std::int64_t j, std::int64_t columns, int mx) -> typename V::vi {
  return V::load(static_cast<const std::int32_t*>(p) + lane_index(v0, j, columns) + batch_lanes * mx);
}
template <class V>
auto xf_at(const float* p, std::int64_t v0, std::int64_t j, std::int64_t columns, int mx) -> typename V::vf {
  return V::loadf(p + lane_index(v0, j, columns) + batch_lanes * mx);
}

// Rows r0..r0 + NR (Q8_0: in place at rp, flipped to unsigned as
// broadcast; Q4_0 and MXFP4: decoded, w at stride ldw) times x lanes v0..v0 + 16·MX,
// for blocks b0..b0 + nc; each block's sum starts from x's correction for
// the weights' offset. acc: [batch_rows][slab] running sums (from zero
// where b0 = 0).
template <class V, tensor_type T, int NR, int MX>
[[gnu::noinline]] void small_t_rows(const std::uint8_t* w, std::int64_t ldw, const std::byte* const* rp,
                                    std::int64_t b0, std::int64_t nc, const acts& a, std::int64_t r0, std::int64_t v0,
                                    float* acc) {
  using F = small_format<V, T>;
  using vi = typename V::vi;
  using vf = typename V::vf;
  vf f[NR][MX];
  #pragma GCC unroll 16
  for (int r = 0; r < NR; ++r)
    #pragma GCC unroll 16
    for (int mx = 0; mx < MX; ++mx) f[r][mx] = b0 == 0 ? V::set1f(0.0f) : V::loadf(acc + (r0 + r) * slab + batch_lanes * mx);
  for (std::int64_t c = 0; c < nc; ++c) {
    const std::int64_t b = b0 + c;
    vi s[NR][MX];
    #pragma GCC unroll 16
    for (int mx = 0; mx < MX; ++mx) {
      const vi start = V::shl(x_at<V>(a.ns32t, v0, b, a.k / 32, mx), F::offset_shift);
      #pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) s[r][mx] = start;
    }
    #pragma GCC unroll 16
    for (int g = 0; g < 8; ++g) {
      vi xv[MX];
      #pragma GCC unroll 16
      for (int mx = 0; mx < MX; ++mx) xv[mx] = x_at<V>(a.qt, v0, 8 * b + g, a.k / 4, mx);
      #pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) {
        const vi wv = T == tensor_type::q8_0
                          ? V::xor_(V::bcast(rp[r0 + r] + b * F::block_bytes + 2 + 4 * g), V::set1(std::int32_t(0x80808080u)))
                          : V::bcast(w + (r0 + r) * ldw + 32 * c + 4 * g);
        #pragma GCC unroll 16
        for (int mx = 0; mx < MX; ++mx) s[r][mx] = V::dot(s[r][mx], wv, xv[mx]);
      }
    }
    vf dx[MX];
    #pragma GCC unroll 16
    for (int mx = 0; mx < MX; ++mx) dx[mx] = xf_at<V>(a.dt, v0, b, a.k / 32, mx);
    #pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      const vf scale = F::bcast_scale(rp[r0 + r] + b * F::block_bytes);
      #pragma GCC unroll 16
      for (int mx = 0; mx < MX; ++mx) f[r][mx] = V::fma(V::mul(scale, dx[mx]), V::cvt(s[r][mx]), f[r][mx]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < NR; ++r)
    #pragma GCC unroll 16
    for (int mx = 0; mx < MX; ++mx) V::storef(acc + (r0 + r) * slab + batch_lanes * mx, f[r][mx]);
}

// A superblock's K-quant scales in a batch call, row r at: sc [num_sub][r],
// min pairs [4][r] (mins 2q and 2q + 1 as int16), d and dmin [r] (row
// stride batch_rows).
struct k_scales {
  std::int32_t* sc;
  std::int32_t* mpairs;
  float* d;
  float* dmin;
};

// The K-quant micro-kernel for superblock b.
template <class V, tensor_type T, int NR, int MX>
[[gnu::noinline]] void k_t_rows(const std::uint8_t* w, std::int64_t ldw, const k_scales ks, std::int64_t b,
                                const acts& a, std::int64_t r0, std::int64_t v0, float* acc) {
  using F = k_format<V, T>;
  using vi = typename V::vi;
  using vf = typename V::vf;
  constexpr int groups = 64 / F::num_sub;
  vi isum[NR][MX];
  #pragma GCC unroll 16
  for (int r = 0; r < NR; ++r)
    #pragma GCC unroll 16
    for (int mx = 0; mx < MX; ++mx) isum[r][mx] = V::set1(0);
  for (int s = 0; s < F::num_sub; ++s) {
    vi p[NR][MX];
    #pragma GCC unroll 16
    for (int mx = 0; mx < MX; ++mx) {
      // Q6_K's values are stored plus 32: start from -32 · Σ q.
      vi start = V::set1(0);
      if constexpr (!F::mins) start = V::shl(x_at<V>(a.ns16t, v0, 16 * b + s, a.k / 16, mx), 5);
      #pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) p[r][mx] = start;
    }
    #pragma GCC unroll 16
    for (int g = 0; g < groups; ++g) {
      const std::int64_t kg = groups * s + g;
      vi xv[MX];
      #pragma GCC unroll 16
      for (int mx = 0; mx < MX; ++mx) xv[mx] = x_at<V>(a.qt, v0, 64 * b + kg, a.k / 4, mx);
      #pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) {
        const vi wv = V::bcast(w + (r0 + r) * ldw + 4 * kg);
        #pragma GCC unroll 16
        for (int mx = 0; mx < MX; ++mx) p[r][mx] = V::dot(p[r][mx], wv, xv[mx]);
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      const vi scale = V::bcast(ks.sc + s * batch_rows<V> + r0 + r);
      #pragma GCC unroll 16
      for (int mx = 0; mx < MX; ++mx) isum[r][mx] = V::add(isum[r][mx], V::mullo(p[r][mx], scale));
    }
  }
  #pragma GCC unroll 16
  for (int mx = 0; mx < MX; ++mx) {
    const vf dx = xf_at<V>(a.dt, v0, b, a.k / 256, mx);
    [[maybe_unused]] vi neg[4];
    if constexpr (F::mins)
      #pragma GCC unroll 16
      for (int q = 0; q < 4; ++q) neg[q] = x_at<V>(a.ns32pt, v0, 4 * b + q, a.k / 64, mx);
    #pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      float* out = acc + (r0 + r) * slab + batch_lanes * mx;
      vf f = V::fma(V::mul(V::set1f(ks.d[r0 + r]), dx), V::cvt(isum[r][mx]), b == 0 ? V::set1f(0.0f) : V::loadf(out));
      if constexpr (F::mins) {
        vi msum = V::set1(0);
        #pragma GCC unroll 16
        for (int q = 0; q < 4; ++q) msum = V::dotw(msum, V::bcast(ks.mpairs + q * batch_rows<V> + r0 + r), neg[q]);
        f = V::fma(V::mul(V::set1f(ks.dmin[r0 + r]), dx), V::cvt(msum), f);
      }
      V::storef(out, f);
    }
  }
}

// Runs Micro<NR> over the call's first nr rows: nr_t at a time, a tail in
// 4, 2 and 1.
template <class Micro>
void over_rows_t(std::int64_t nr, Micro&& micro) {
  for (std::int64_t r0 = 0; r0 < nr;) {
    const std::int64_t left = nr - r0;
    const int n = left >= nr_t ? nr_t : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    switch (n) {
      case nr_t: micro.template operator()<nr_t>(r0); break;
      case 4: micro.template operator()<4>(r0); break;
      case 2: micro.template operator()<2>(r0); break;
      default: micro.template operator()<1>(r0); break;
    }
    r0 += n;
  }
}

// Runs Slab(v0, acc) for every slab of x's rows (m is whole slabs), acc
// [batch_rows][slab] stored into y's rows after each (the micro-kernels
// start it from zero at the first block), 16 x 16 blocks transposed.
template <class V, class Slab>
void over_slabs(const acts& a, std::int64_t row0, std::int64_t nr, float* y, std::int64_t ldy, Slab&& run) {
  auto* acc = reinterpret_cast<float*>(scratch(2, static_cast<std::size_t>(batch_rows<V> * slab) * sizeof(float)));
  // The rows past nr that the last block's transpose reads (and does not
  // store), zero rather than whatever the scratch held.
  const std::int64_t read = (nr + V::R - 1) / V::R * V::R;
  std::fill(acc + nr * slab, acc + read * slab, 0.0f);
  for (std::int64_t v0 = 0; v0 < a.m; v0 += slab) {
    run(v0, acc);
    for (std::int64_t r = 0; r < nr; r += V::R)
      for (std::int64_t i = 0; i < slab; i += batch_lanes)
        V::store_transposed(acc + r * slab + i, slab, y + (v0 + i) * ldy + row0 + r, ldy,
                            std::min<std::int64_t>(V::R, nr - r));
  }
}

// The rows of a batch kernel call: row r of [row0, row0 + nr) at p[r] (past
// nr, the last row again, its results unused).
template <class V>
struct batch_rows_of {
  const std::byte* p[batch_rows<V>];
  std::int64_t row_bytes;

  batch_rows_of(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr) : row_bytes(row_bytes) {
    for (std::int64_t r = 0; r < batch_rows<V>; ++r) p[r] = w + (row0 + std::min(r, nr - 1)) * row_bytes;
  }

  // Asks for bytes [off, off + len) of every row; past a row's end, of the
  // row batch_rows further on (the same thread's next call under a static
  // schedule; past the matrix, nothing faults). One prefetch a line.
  // Rows [r0, r0 + n) only, where given: spread over a chunk's micro-kernel
  // calls, so that the core is never asked for more lines at once than it
  // keeps misses in flight.
  [[gnu::always_inline]] void prefetch(std::int64_t off, std::int64_t len, std::int64_t r0 = 0,
                                       std::int64_t n = batch_rows<V>) const {
    const std::int64_t shift = off >= row_bytes ? batch_rows<V> * row_bytes - row_bytes : 0;
    for (std::int64_t r = r0; r < r0 + n; ++r) {
      const std::byte* at = p[r] + shift + off;
      const std::byte* end = at + len;
      for (; at < end; at += 64) __builtin_prefetch(at, 0, 3);
      __builtin_prefetch(end - 1, 0, 3);
    }
  }
};

// The V::R-row tiles of rows [row0, row0 + nr).
template <class V>
struct batch_tiles {
  static constexpr int count = batch_rows<V> / V::R;
  const tile_rows<V::R> tile[count];
  const int used;

  batch_tiles(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr)
      : tile{make(w, row_bytes, row0, nr, 0), make(w, row_bytes, row0, nr, 1), make(w, row_bytes, row0, nr, 2)},
        used(static_cast<int>((nr + V::R - 1) / V::R)) {
    static_assert(count == 3);
  }
  // Tile h (past the rows: the last row again, its results unused).
  static auto make(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, int h)
      -> tile_rows<V::R> {
    const std::int64_t first = std::min<std::int64_t>(h * V::R, nr - 1);
    return {w, row_bytes, row0 + first, std::min<std::int64_t>(V::R, nr - first)};
  }
};

// Where a batch call keeps its decoded weights (rows of a chunk at stride
// ld): with one slab of x, one chunk at a time, reused (it stays in L1);
// with more, every chunk, for the later slabs to read again, rows a line
// longer than k (k a power of two would put a chunk's rows in the same L1
// sets).
// `extra`: extra_bytes more in the same scratch buffer, for the caller.
struct decoded_rows {
  std::uint8_t* base;
  std::byte* extra;
  std::int64_t ld;
  bool whole;

  decoded_rows(std::int64_t rows, const acts& a, std::size_t extra_bytes = 0) : whole(a.m > slab) {
    ld = whole ? a.k + 64 : chunk_t;
    auto* p = scratch(3, static_cast<std::size_t>(rows * ld) + extra_bytes);
    base = reinterpret_cast<std::uint8_t*>(p);
    extra = p + rows * ld;
  }
  // The chunk starting at value v0.
  auto at(std::int64_t v0) const -> std::uint8_t* { return whole ? base + v0 : base; }
};

// The first slab decodes each chunk just before it multiplies it; later
// slabs read the decoded rows again. Q8_0 is read in place.
template <class V, tensor_type T>
void small_tile_t(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, const acts& a,
                  float* y, std::int64_t ldy) {
  using F = small_format<V, T>;
  constexpr bool decoded = T != tensor_type::q8_0;
  const std::int64_t nb = a.k / 32, per_chunk = chunk_t / 32;
  const batch_rows_of<V> rows(w, row_bytes, row0, nr);
  const decoded_rows wt(decoded ? batch_rows<V> : 0, a);
  over_slabs<V>(a, row0, nr, y, ldy, [&](std::int64_t v0, float* acc) {
    for (std::int64_t b0 = 0; b0 < nb; b0 += per_chunk) {
      const std::int64_t nc = std::min(per_chunk, nb - b0);
      std::uint8_t* chunk = decoded ? wt.at(32 * b0) : nullptr;
      if constexpr (decoded)
        if (v0 == 0)
          for (std::int64_t r = 0; r < nr; ++r)
            for (std::int64_t c = 0; c < nc; ++c)
              decode_row<T>(rows.p[r] + (b0 + c) * F::block_bytes, chunk + r * wt.ld + 32 * c);
      over_rows_t(nr, [&]<int NR>(std::int64_t r0) {
        if (v0 == 0) rows.prefetch(std::min(b0 + per_chunk, nb) * F::block_bytes, per_chunk * F::block_bytes, r0, NR);
        small_t_rows<V, T, NR, 2>(chunk, wt.ld, rows.p, b0, nc, a, r0, v0, acc);
      });
    }
  });
}

template <class V, tensor_type T>
void k_tile_t(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr, const acts& a, float* y,
              std::int64_t ldy) {
  using F = k_format<V, T>;
  using vi = typename V::vi;
  using vf = typename V::vf;
  constexpr std::int64_t TR = batch_rows<V>;
  const batch_tiles<V> tiles(w, row_bytes, row0, nr);
  const batch_rows_of<V> rows(w, row_bytes, row0, nr);
  const std::int64_t nb = a.k / 256;
  // Per superblock (kept for later slabs, as the decoded rows are): the scales.
  constexpr std::int64_t per_block = (F::num_sub + 4 + 2) * TR;
  const decoded_rows wt(TR, a, static_cast<std::size_t>((a.m > slab ? nb : 1) * per_block * 4));
  const auto scales = [&](std::int64_t b) {
    auto* p = reinterpret_cast<std::int32_t*>(wt.extra) + (wt.whole ? b : 0) * per_block;
    return k_scales{p, p + F::num_sub * TR, reinterpret_cast<float*>(p + (F::num_sub + 4) * TR),
                    reinterpret_cast<float*>(p + (F::num_sub + 5) * TR)};
  };
  over_slabs<V>(a, row0, nr, y, ldy, [&](std::int64_t v0, float* acc) {
    for (std::int64_t b = 0; b < nb; ++b) {
      const k_scales ks = scales(b);
      if (v0 == 0) {
        for (int h = 0; h < tiles.used; ++h) {
          vi scv[F::num_sub], mnv[8];
          vf dv, dminv;
          F::header(tiles.tile[h], b, scv, mnv, dv, dminv);
          const std::int64_t at = h * V::R;
          for (int s = 0; s < F::num_sub; ++s) V::store(ks.sc + s * TR + at, scv[s]);
          V::storef(ks.d + at, dv);
          if constexpr (F::mins) {
            V::storef(ks.dmin + at, dminv);
            for (int q = 0; q < 4; ++q) V::store(ks.mpairs + q * TR + at, F::min_pair(mnv, q));
          }
        }
        for (std::int64_t r = 0; r < nr; ++r) decode_row<T>(rows.p[r] + b * F::block_bytes, wt.at(256 * b) + r * wt.ld);
      }
      over_rows_t(nr, [&]<int NR>(std::int64_t r0) {
        if (v0 == 0) rows.prefetch((b + 1) * F::block_bytes, F::block_bytes, r0, NR);
        k_t_rows<V, T, NR, 2>(wt.at(256 * b), wt.ld, ks, b, a, r0, v0, acc);
      });
    }
  });
}

template <class V>
auto with_batch_kernels(kernel_set k) -> kernel_set {
  k.q8_0_t = small_tile_t<V, tensor_type::q8_0>;
  k.q4_0_t = small_tile_t<V, tensor_type::q4_0>;
  k.q4_k_t = k_tile_t<V, tensor_type::q4_k>;
  k.q5_k_t = k_tile_t<V, tensor_type::q5_k>;
  k.q6_k_t = k_tile_t<V, tensor_type::q6_k>;
  k.mxfp4_t = small_tile_t<V, tensor_type::mxfp4>;
  k.batch_rows = batch_rows<V>;
  return k;
}

} // namespace
} // namespace troupe::quant
