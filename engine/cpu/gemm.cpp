#include "engine/cpu/gemm.hpp"

#include "base/check.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <omp.h>
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

namespace troupe {
namespace {

// 16 floats: one AVX-512 register where the target has them, two AVX2 ones
// (or four SSE) elsewhere; GCC lowers the same code to what -march offers.
using v16 = float __attribute__((vector_size(64), aligned(64)));
using v16u = float __attribute__((vector_size(64), aligned(4)));

auto load(const float* p) -> v16 { return *reinterpret_cast<const v16u*>(p); }

// Fused multiply-adds are written out, never left to the compiler's
// contraction, which may differ between two loops: the panel kernel and the
// packed matrix-vector kernel must round alike (see gemm.hpp).
auto fma16(v16 a, v16 b, v16 c) -> v16 {
#if defined(__AVX512F__)
  return reinterpret_cast<v16>(_mm512_fmadd_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b),
                                               reinterpret_cast<__m512>(c)));
#elif defined(__FMA__)
  using v8 = float __attribute__((vector_size(32)));
  const auto half = [](v8 x, v8 y, v8 z) { return reinterpret_cast<v8>(_mm256_fmadd_ps(x, y, z)); };
  const v8 lo = half(__builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7), __builtin_shufflevector(b, b, 0, 1, 2, 3, 4, 5, 6, 7),
                     __builtin_shufflevector(c, c, 0, 1, 2, 3, 4, 5, 6, 7));
  const v8 hi = half(__builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15),
                     __builtin_shufflevector(b, b, 8, 9, 10, 11, 12, 13, 14, 15),
                     __builtin_shufflevector(c, c, 8, 9, 10, 11, 12, 13, 14, 15));
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  // No fused instruction on the target: nothing for the compiler to contract into.
  return a * b + c;
#endif
}

auto splat(float f) -> v16 { return v16{f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f}; }

auto hsum(v16 v) -> float {
  float s = 0.0f;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

struct free_deleter {
  void operator()(float* p) const { std::free(p); }
};

// The calling thread's packing buffer, grown when needed and kept: a fresh
// allocation per call would fault in (and zero) new pages every step.
auto pack_buffer(std::size_t n) -> float* {
  thread_local std::unique_ptr<float[], free_deleter> buf;
  thread_local std::size_t capacity = 0;
  if (n > capacity) {
    const std::size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (p == nullptr) throw std::bad_alloc();
    buf.reset(p);
    capacity = bytes / sizeof(float);
  }
  return buf.get();
}

// How the kernels read each weight dtype: 16 elements as one F32 vector, or one.
struct f32_elems {
  using type = float;
  static auto load16(const float* p) -> v16 { return load(p); }
  static auto load1(const float* p) -> float { return *p; }
};

struct bf16_elems {
  using type = std::uint16_t;
  static auto load16(const std::uint16_t* p) -> v16 {
    using u16x16 = std::uint16_t __attribute__((vector_size(32), aligned(2)));
    using u32x16 = std::uint32_t __attribute__((vector_size(64)));
    const auto wide = __builtin_convertvector(*reinterpret_cast<const u16x16*>(p), u32x16) << 16;
    return reinterpret_cast<v16>(wide);
  }
  static auto load1(const std::uint16_t* p) -> float { return bf16_to_f32(*p); }
};

struct f16_elems {
  using type = std::uint16_t;
  static auto load16(const std::uint16_t* p) -> v16 {
#if defined(__AVX512F__)
    // maskz: the unmasked form trips GCC 12's -Wmaybe-uninitialized
    return reinterpret_cast<v16>(
        _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#else
    v16 v;
    for (int i = 0; i < 16; ++i) v[i] = f16_to_f32(p[i]);
    return v;
#endif
  }
  static auto load1(const std::uint16_t* p) -> float {
#if defined(__F16C__)
    return _cvtsh_ss(*p);
#else
    return f16_to_f32(*p);
#endif
  }
};


// Calls f(E{}, weights) with the element reader and typed weights of a job.
template <class F>
void with_elems(const void* w, dtype type, F&& f) {
  switch (type) {
    case dtype::f32: return f(f32_elems{}, static_cast<const float*>(w));
    case dtype::bf16: return f(bf16_elems{}, static_cast<const std::uint16_t*>(w));
    case dtype::f16: return f(f16_elems{}, static_cast<const std::uint16_t*>(w));
    case dtype::u8: break; // raw bytes, never a weight (the loaders refuse them)
  }
  TROUPE_CHECK(false, "gemm: U8 bytes are not a weight's values");
}

// ---- m <= 16 on packed16 weights: sixteen rows in a vector, x broadcast.

// G groups of 16 rows against MR rows of x (row stride k): acc[b][g] =
// Σ_i w[g][i, :] · x[b][i], one chain per output, G·MR independent chains.
// Each group is one stream of 16·k elements; each new line fetches the one
// a few KiB ahead in its stream (past a group's end, the next group's start:
// harmless). out is [MR][16·G].
template <int G, int MR, class E>
[[gnu::noinline]] void packed_rows(const float* x, std::int64_t k, const typename E::type* w, float* out) {
  using T = typename E::type;
  const std::int64_t stride = 16 * k;
  constexpr std::int64_t steps_per_line = 64 / (16 * sizeof(T)); // 1 (F32) or 2
  // Elements ahead: 8 KiB for F32, 4 KiB for 16-bit weights (measured, one
  // thread, weights from DRAM: the distances that matched a plain read).
  constexpr std::int64_t ahead = (sizeof(T) == 4 ? 8192 : 4096) / sizeof(T);
  v16 acc[MR][G] = {};
  for (std::int64_t i = 0; i < k; ++i) {
    v16 wv[G];
    for (int g = 0; g < G; ++g) {
      const T* p = w + g * stride + 16 * i;
      if (i % steps_per_line == 0) __builtin_prefetch(p + ahead, 0, 3);
      wv[g] = E::load16(p);
      asm("" : "+v"(wv[g])); // in registers, not folded into each FMA
    }
    for (int b = 0; b < MR; ++b) {
      const v16 xv = splat(x[b * k + i]);
      for (int g = 0; g < G; ++g) acc[b][g] = fma16(wv[g], xv, acc[b][g]);
    }
  }
  for (int b = 0; b < MR; ++b)
    for (int g = 0; g < G; ++g) std::memcpy(out + (b * G + g) * 16, &acc[b][g], sizeof(v16));
}

// Rows [b0, b0 + MR) of x against the ng (<= G) groups at w.
template <int G, int MR, class E>
void packed_block(const float* x, std::int64_t k, const typename E::type* w, std::int64_t ng, float* out) {
  switch (ng) {
    case 1: return packed_rows<1, MR, E>(x, k, w, out);
    case 2: if constexpr (G >= 2) return packed_rows<2, MR, E>(x, k, w, out); break;
    case 3: if constexpr (G >= 3) return packed_rows<3, MR, E>(x, k, w, out); break;
    case 4: if constexpr (G >= 4) return packed_rows<4, MR, E>(x, k, w, out); break;
    default: break;
  }
  assert(false && "packed_block: more groups than the tile holds");
}

// Inside a parallel region: y = x Wᵀ for packed16 W [n, k] and m <= 16 rows
// of x, read where they lie. The threads share tiles of row groups: for one
// row of x, where the weights stream once, one group of F32 weights (a
// single stream reads DRAM fastest; one FMA chain still outruns it) or four
// of 16-bit ones (their widening needs the parallel chains); else three
// with 8 rows of x at a time (24 accumulators, 11 loads per 24 FMAs). No
// barrier: jobs write apart.
template <class E>
void packed_small(const float* x, std::int64_t m, const typename E::type* w, std::int64_t n, std::int64_t k,
                  float* y) {
  constexpr std::int64_t gemv_groups = sizeof(typename E::type) == 4 ? 1 : 4;
  const std::int64_t groups_per_tile = m == 1 ? gemv_groups : 3;
  const std::int64_t num_groups = (n + 15) / 16;
  const std::int64_t num_tiles = (num_groups + groups_per_tile - 1) / groups_per_tile;
#pragma omp for schedule(static) nowait
  for (std::int64_t t = 0; t < num_tiles; ++t) {
    const std::int64_t g0 = t * groups_per_tile;
    const std::int64_t ng = std::min(groups_per_tile, num_groups - g0);
    const typename E::type* wg = w + g0 * 16 * k;
    const std::int64_t cols = std::min<std::int64_t>(16 * ng, n - 16 * g0);
    alignas(64) float out[8 * 16 * 4];
    for (std::int64_t b0 = 0; b0 < m; b0 += 8) {
      const float* xb = x + b0 * k;
      switch (std::min<std::int64_t>(8, m - b0)) {
        case 1:
          if (m == 1)
            packed_block<gemv_groups, 1, E>(xb, k, wg, ng, out);
          else
            packed_block<3, 1, E>(xb, k, wg, ng, out);
          break;
        case 2: packed_block<3, 2, E>(xb, k, wg, ng, out); break;
        case 3: packed_block<3, 3, E>(xb, k, wg, ng, out); break;
        case 4: packed_block<3, 4, E>(xb, k, wg, ng, out); break;
        case 5: packed_block<3, 5, E>(xb, k, wg, ng, out); break;
        case 6: packed_block<3, 6, E>(xb, k, wg, ng, out); break;
        case 7: packed_block<3, 7, E>(xb, k, wg, ng, out); break;
        default: packed_block<3, 8, E>(xb, k, wg, ng, out); break;
      }
      for (std::int64_t b = b0; b < std::min<std::int64_t>(m, b0 + 8); ++b)
        std::memcpy(y + b * n + 16 * g0, out + (b - b0) * ng * 16, static_cast<std::size_t>(cols) * sizeof(float));
    }
  }
}

// ---- m >= 2 (and m = 1 on row-major weights): panels of x, weights
// broadcast.

// A micro-tile multiplies NR weight rows by one packed panel of 16·MV rows
// of x (k-major: [k, 16·MV]), outer-product form: each step broadcasts one
// F32 weight per row against the panel's vectors. Row r's weight i is
// rows[r][S·i]: S = 1 for row-major rows, 16 for packed16 ones. Always
// inlined: called out of line, the accumulators would live in memory.
//
// `next` is given when the weights are F32 in memory, else null. Row-major:
// the following tile's NR·k weights; while this tile's rows are multiplied,
// every 16 steps fetch NR more lines of it into L2, so the whole next tile
// arrives one tile's compute time (~1 µs) ahead, which hides DRAM latency
// (with only the hardware prefetcher and software prefetches a few lines
// ahead in each of the NR streams, the kernel ran at 0.8 of its speed on
// L3-resident weights). Packed16: the group's start; a group is one
// stream, a line a step, fetched 512 steps ahead (measured: 64 steps
// left DRAM latency exposed, 0.8 of the row-major kernel's speed).
template <int NR, int MV, int S>
[[gnu::always_inline]] inline void accumulate(const float* panel, const float* const* rows,
                                              std::int64_t k, const float* next,
                                              v16 (&acc)[NR][MV]) {
  constexpr std::int64_t width = 16 * MV;
  for (std::int64_t i = 0; i < k; ++i) {
    if constexpr (S == 1) {
      if (next != nullptr && i % 16 == 0)
        for (int r = 0; r < NR; ++r) __builtin_prefetch(next + i * NR + 16 * r, 0, 2);
    } else {
      // One line a step: the group's stream, 512 steps (32 KiB) ahead.
      if (next != nullptr) __builtin_prefetch(next + 16 * (i + 512), 0, 2);
    }
    v16 x[MV];
    for (int v = 0; v < MV; ++v) {
      x[v] = *reinterpret_cast<const v16*>(panel + i * width + 16 * v);
      // Keep the panel in registers: folded into every FMA as a memory
      // operand it would cost NR loads more per step, and loads bind first.
      asm("" : "+v"(x[v]));
    }
    for (int r = 0; r < NR; ++r) {
      const v16 wv = splat(rows[r][S * i]);
      for (int v = 0; v < MV; ++v) acc[r][v] = fma16(x[v], wv, acc[r][v]);
    }
  }
}

// Half-precision weights are widened k_chunk columns at a time, with vector
// conversions, into an L1-resident F32 tile first: scalar widening per
// broadcast would triple the instructions of the inner loop.
constexpr std::int64_t k_chunk = 256;

// Never inlined: inside the parallel loop GCC's register allocator spills
// the panel vectors and an accumulator (measured: half the throughput).
// Row-major: wrows are NR row starts. Packed16: wrows[0] is the group's
// start and the tile its rows [r0, r0 + NR) (NR = 8).
template <int NR, int MV, class E, weight_layout L>
[[gnu::noinline]] void micro_tile(const float* panel, const typename E::type* const* wrows, int r0,
                                  std::int64_t k, float* out) {
  constexpr std::int64_t width = 16 * MV;
  constexpr int S = L == weight_layout::packed16 ? 16 : 1;
  v16 acc[NR][MV] = {};
  if constexpr (std::is_same_v<E, f32_elems>) {
    const float* rows[NR];
    for (int r = 0; r < NR; ++r) rows[r] = L == weight_layout::packed16 ? wrows[0] + r0 + r : wrows[r];
    accumulate<NR, MV, S>(panel, rows, k, L == weight_layout::packed16 ? wrows[0] : wrows[0] + NR * k, acc);
  } else {
    constexpr int tile_width = L == weight_layout::packed16 ? 16 : NR;
    alignas(64) float tile[tile_width * k_chunk];
    const float* rows[NR];
    for (int r = 0; r < NR; ++r) rows[r] = L == weight_layout::packed16 ? tile + r0 + r : tile + r * k_chunk;
    for (std::int64_t k0 = 0; k0 < k; k0 += k_chunk) {
      const std::int64_t kc = std::min(k_chunk, k - k0);
      if constexpr (L == weight_layout::packed16) {
        // The group's [kc, 16] block: 16 rows of one column per vector.
        const typename E::type* src = wrows[0] + 16 * k0;
        for (std::int64_t i = 0; i < kc; ++i) {
          __builtin_prefetch(src + 16 * i + 256, 0, 3);
          const v16 v = E::load16(src + 16 * i);
          std::memcpy(tile + 16 * i, &v, sizeof(v16));
        }
      } else {
        for (int r = 0; r < NR; ++r) {
          const typename E::type* src = wrows[r] + k0;
          std::int64_t i = 0;
          for (; i + 16 <= kc; i += 16) {
            __builtin_prefetch(src + i + 128, 0, 3);
            const v16 v = E::load16(src + i);
            std::memcpy(tile + r * k_chunk + i, &v, sizeof(v16));
          }
          for (; i < kc; ++i) tile[r * k_chunk + i] = E::load1(src + i);
        }
      }
      accumulate<NR, MV, S>(panel + k0 * width, rows, kc, nullptr, acc);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < MV; ++v) std::memcpy(out + r * width + 16 * v, &acc[r][v], sizeof(v16));
}

template <int NR, int MV, class E, weight_layout L>
void tile_rows(const float* panel, const typename E::type* w, std::int64_t row, std::int64_t nr,
               std::int64_t k, float* out) {
  const typename E::type* rows[NR];
  int r0 = 0;
  if constexpr (L == weight_layout::packed16) {
    rows[0] = w + row / 16 * 16 * k; // the group's start
    r0 = static_cast<int>(row % 16);
  } else {
    for (std::int64_t r = 0; r < nr; ++r) rows[r] = w + (row + r) * k;
    // The last, partial tile: repeat the final row (its results unused).
    for (std::int64_t r = nr; r < NR; ++r) rows[r] = rows[nr - 1];
  }
  micro_tile<NR, MV, E, L>(panel, rows, r0, k, out);
}

// Inside a parallel region: x into ⌈m/width⌉ zero-padded k-major panels,
// rows shared among the team, each read once along its length.
void pack_panels(const float* x, std::int64_t m, std::int64_t k, std::int64_t width, float* p) {
  const std::int64_t rows = (m + width - 1) / width * width;
#pragma omp for schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    float* dst = p + (row / width) * k * width + row % width;
    const float* src = x + row * k;
    for (std::int64_t i = 0; i < k; ++i) dst[i * width] = row < m ? src[i] : 0.0f;
  }
}

// Inside a parallel region, after pack_panels: each thread owns a range of
// weight rows; for each micro-tile of rows it visits every panel, so a
// weight row is read from memory once. No barrier at the end: jobs write
// disjoint outputs.
template <int NR, int MV, class E, weight_layout L>
void multiply_panels(const float* p, std::int64_t m, const typename E::type* w, std::int64_t n,
                     std::int64_t k, float* y) {
  constexpr std::int64_t width = 16 * MV;
  const std::int64_t num_panels = (m + width - 1) / width;
  const std::int64_t num_tiles = (n + NR - 1) / NR;
  alignas(64) float out[NR * width];
#pragma omp for schedule(static) nowait
  for (std::int64_t ti = 0; ti < num_tiles; ++ti) {
    const std::int64_t row = ti * NR;
    const std::int64_t nr = std::min<std::int64_t>(NR, n - row);
    for (std::int64_t pi = 0; pi < num_panels; ++pi) {
      tile_rows<NR, MV, E, L>(p + pi * k * width, w, row, nr, k, out);
      const std::int64_t rows_here = std::min(width, m - pi * width);
      for (std::int64_t j = 0; j < rows_here; ++j) {
        float* yj = y + (pi * width + j) * n + row;
        for (std::int64_t r = 0; r < nr; ++r) yj[r] = out[r * width + j];
      }
    }
  }
}

// The tile shapes, by the panel width: row-major weights NR=12 x MV=1 (16
// rows of x) for m <= 16, else NR=6 x MV=2 (32 rows; 12 accumulators);
// packed16 ones (m > 16 only: fewer take packed_small) half a group, NR=8 x
// MV=2. (Measured: MV=3, NR=8 with 24 accumulators ran at 0.7 of MV=2.)
template <int MV>
void multiply_job(const float* p, std::int64_t m, std::int64_t k, const matmul_job& j) {
  with_elems(j.w, j.type, [&]<class E>(E, const typename E::type* w) {
    if constexpr (MV == 1)
      multiply_panels<12, 1, E, weight_layout::row_major>(p, m, w, j.n, k, j.y);
    else if (j.layout == weight_layout::packed16)
      multiply_panels<8, 2, E, weight_layout::packed16>(p, m, w, j.n, k, j.y);
    else
      multiply_panels<6, 2, E, weight_layout::row_major>(p, m, w, j.n, k, j.y);
  });
}

// Panels of x (16 rows wide for m <= 16, else 32), packed once for every
// job; one parallel region for all of them.
template <int MV>
void gemm_jobs(const float* x, std::int64_t m, std::int64_t k, std::span<const matmul_job> jobs) {
  constexpr std::int64_t width = 16 * MV;
  float* p = pack_buffer(static_cast<std::size_t>((m + width - 1) / width * k * width));
#pragma omp parallel
  {
    pack_panels(x, m, k, width, p);
    for (const auto& j : jobs) multiply_job<MV>(p, m, k, j);
  }
}

// m <= 16 with packed16 weights: one parallel region for every job, x read
// where it lies (packed_small).
void small_jobs(const float* x, std::int64_t m, std::int64_t k, std::span<const matmul_job> jobs) {
  std::int64_t total = 0;
  for (const auto& j : jobs) total += j.n;
#pragma omp parallel if (total * k * m > (1 << 16))
  for (const auto& j : jobs)
    with_elems(j.w, j.type, [&]<class E>(E, const typename E::type* w) { packed_small<E>(x, m, w, j.n, k, j.y); });
}

} // namespace

auto read_sum_f32(const float* p, std::int64_t n) -> float {
  float total = 0.0f;
#pragma omp parallel reduction(+ : total)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t per = n / threads / 64 * 64;
    const std::int64_t begin = t * per, end = t == threads - 1 ? n : begin + per;
    v16 a0{}, a1{}, a2{}, a3{};
    std::int64_t i = begin;
    for (; i + 64 <= end; i += 64) {
      a0 += load(p + i);
      a1 += load(p + i + 16);
      a2 += load(p + i + 32);
      a3 += load(p + i + 48);
    }
    float s = hsum((a0 + a1) + (a2 + a3));
    for (; i < end; ++i) s += p[i];
    total += s;
  }
  return total;
}

void gemm_multi(const float* x, std::int64_t m, std::int64_t k, std::span<const matmul_job> jobs) {
  if (jobs.empty()) return;
  const auto layout = jobs.front().layout;
  for (const auto& j : jobs) assert(j.layout == layout && "gemm_multi: one weight layout for every job");
  if (m > 16)
    gemm_jobs<2>(x, m, k, jobs);
  else if (layout == weight_layout::packed16)
    small_jobs(x, m, k, jobs);
  else
    gemm_jobs<1>(x, m, k, jobs);
}

void gemm(const float* x, std::int64_t m, const void* w, dtype type, std::int64_t n, std::int64_t k, float* y,
          weight_layout layout) {
  const matmul_job job{w, type, n, y, layout};
  gemm_multi(x, m, k, std::span(&job, 1));
}

auto packed16_bytes(dtype type, std::int64_t n, std::int64_t k) -> std::size_t {
  return static_cast<std::size_t>((n + 15) / 16 * 16 * k) * dtype_size(type);
}

void pack16(const void* src, dtype type, std::int64_t n, std::int64_t k, void* dst) {
  const auto size = static_cast<std::int64_t>(dtype_size(type));
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  const std::int64_t num_groups = (n + 15) / 16;
#pragma omp parallel for schedule(static)
  for (std::int64_t g = 0; g < num_groups; ++g)
    for (std::int64_t r = 0; r < 16; ++r) {
      const std::int64_t row = 16 * g + r;
      std::byte* out = d + (g * 16 * k + r) * size;
      if (row >= n) {
        for (std::int64_t c = 0; c < k; ++c) std::memset(out + 16 * c * size, 0, static_cast<std::size_t>(size));
        continue;
      }
      const std::byte* in = s + row * k * size;
      if (size == 4) {
        for (std::int64_t c = 0; c < k; ++c) std::memcpy(out + 16 * c * 4, in + c * 4, 4);
      } else {
        for (std::int64_t c = 0; c < k; ++c) std::memcpy(out + 16 * c * 2, in + c * 2, 2);
      }
    }
}

auto packed16_at(const void* w, dtype type, std::int64_t k, std::int64_t row, std::int64_t col) -> float {
  return load_as_f32(type, w, static_cast<std::size_t>((row / 16) * 16 * k + 16 * col + row % 16));
}

} // namespace troupe
