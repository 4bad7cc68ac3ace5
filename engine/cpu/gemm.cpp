#include "engine/cpu/gemm.hpp"

#include <algorithm>
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

// How gemv reads each weight dtype: 16 elements as one F32 vector, or one.
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

// Rows [begin, end) of y = W x, four rows at a time so each x load feeds
// four independent accumulator chains. The four rows are 4·k contiguous
// elements read as four short streams, too short for the hardware prefetcher
// to ramp up on; so each step also prefetches the next group, as many bytes
// ahead as the step reads (measured here, F32: 0.80 → 0.93 of a plain
// sequential read).
template <class E>
void gemv_rows(const float* x, const typename E::type* w, std::int64_t begin, std::int64_t end,
               std::int64_t k, float* y) {
  using T = typename E::type;
  const std::int64_t k16 = k / 16 * 16;
  std::int64_t r = begin;
  for (; r + 4 <= end; r += 4) {
    const T* w0 = w + r * k;
    const T* w1 = w0 + k;
    const T* w2 = w1 + k;
    const T* w3 = w2 + k;
    const char* next = reinterpret_cast<const char*>(w0 + 4 * k);
    v16 a0{}, a1{}, a2{}, a3{};
    for (std::int64_t i = 0; i < k16; i += 16) {
      const char* pf = next + 4 * i * static_cast<std::int64_t>(sizeof(T));
      // The step reads 4 rows × 16 elements = sizeof(T) cache lines (into L1:
      // prefetcht0 measured a few points better than prefetchnta here).
      for (std::size_t line = 0; line < sizeof(T); ++line) __builtin_prefetch(pf + 64 * line, 0, 3);
      const v16 xv = load(x + i);
      a0 += E::load16(w0 + i) * xv;
      a1 += E::load16(w1 + i) * xv;
      a2 += E::load16(w2 + i) * xv;
      a3 += E::load16(w3 + i) * xv;
    }
    float s0 = hsum(a0), s1 = hsum(a1), s2 = hsum(a2), s3 = hsum(a3);
    for (std::int64_t i = k16; i < k; ++i) {
      s0 += E::load1(w0 + i) * x[i];
      s1 += E::load1(w1 + i) * x[i];
      s2 += E::load1(w2 + i) * x[i];
      s3 += E::load1(w3 + i) * x[i];
    }
    y[r] = s0;
    y[r + 1] = s1;
    y[r + 2] = s2;
    y[r + 3] = s3;
  }
  for (; r < end; ++r) {
    const T* wr = w + r * k;
    v16 a{};
    for (std::int64_t i = 0; i < k16; i += 16) a += E::load16(wr + i) * load(x + i);
    float s = hsum(a);
    for (std::int64_t i = k16; i < k; ++i) s += E::load1(wr + i) * x[i];
    y[r] = s;
  }
}

// Calls f(E{}, weights) with the element reader and typed weights of a job.
template <class F>
void with_elems(const matmul_job& j, F&& f) {
  switch (j.type) {
    case dtype::f32: return f(f32_elems{}, static_cast<const float*>(j.w));
    case dtype::bf16: return f(bf16_elems{}, static_cast<const std::uint16_t*>(j.w));
    case dtype::f16: return f(f16_elems{}, static_cast<const std::uint16_t*>(j.w));
  }
}

void gemv_rows_of(const matmul_job& j, const float* x, std::int64_t begin, std::int64_t end,
                  std::int64_t k) {
  with_elems(j, [&]<class E>(E, const typename E::type* w) { gemv_rows<E>(x, w, begin, end, k, j.y); });
}

// A micro-tile multiplies NR weight rows by one packed panel of 16·MV rows
// of x (k-major: [k, 16·MV]), outer-product form: each step broadcasts one
// F32 weight per row against the panel's vectors. MV=2, NR=6 holds 12
// accumulators; MV=1, NR=12 the same for batches of 16 or fewer. Always
// inlined: called out of line, the accumulators would live in memory.
//
// `next` is the following tile's NR·k weights when they lie contiguous in
// memory (F32), else null. While this tile's rows are multiplied, every 16
// steps fetch NR more lines of it into L2: the whole next tile arrives one
// tile's compute time (~1 µs) ahead, which hides DRAM latency. With only the
// hardware prefetcher and software prefetches a few lines ahead in each of
// the NR streams, the kernel ran at 0.8 of its speed on L3-resident weights.
template <int NR, int MV>
[[gnu::always_inline]] inline void accumulate(const float* panel, const float* const* rows,
                                              std::int64_t k, const float* next,
                                              v16 (&acc)[NR][MV]) {
  constexpr std::int64_t width = 16 * MV;
  for (std::int64_t i = 0; i < k; ++i) {
    if (next != nullptr && i % 16 == 0)
      for (int r = 0; r < NR; ++r) __builtin_prefetch(next + i * NR + 16 * r, 0, 2);
    v16 x[MV];
    for (int v = 0; v < MV; ++v) {
      x[v] = *reinterpret_cast<const v16*>(panel + i * width + 16 * v);
      // Keep the panel in registers: folded into every FMA as a memory
      // operand it would cost NR loads more per step, and loads bind first.
      asm("" : "+v"(x[v]));
    }
    for (int r = 0; r < NR; ++r) {
      const float wv = rows[r][i];
      for (int v = 0; v < MV; ++v) acc[r][v] += x[v] * wv;
    }
  }
}

// F32 weights are multiplied where they lie. Half-precision ones are widened
// k_chunk columns at a time, with vector conversions, into an L1-resident
// F32 tile first: scalar widening per broadcast would triple the
// instructions of the inner loop.
constexpr std::int64_t k_chunk = 256;

// Never inlined: inside the parallel loop GCC's register allocator spills
// the panel vectors and an accumulator (measured: half the throughput).
template <int NR, int MV, class E>
[[gnu::noinline]] void micro_tile(const float* panel, const typename E::type* const* wrows,
                                  std::int64_t k, float* out) {
  constexpr std::int64_t width = 16 * MV;
  v16 acc[NR][MV] = {};
  if constexpr (std::is_same_v<E, f32_elems>) {
    accumulate<NR, MV>(panel, wrows, k, wrows[0] + NR * k, acc);
  } else {
    alignas(64) float tile[NR][k_chunk];
    const float* rows[NR];
    for (int r = 0; r < NR; ++r) rows[r] = tile[r];
    for (std::int64_t k0 = 0; k0 < k; k0 += k_chunk) {
      const std::int64_t kc = std::min(k_chunk, k - k0);
      for (int r = 0; r < NR; ++r) {
        const typename E::type* src = wrows[r] + k0;
        std::int64_t i = 0;
        for (; i + 16 <= kc; i += 16) {
          __builtin_prefetch(src + i + 128, 0, 3);
          const v16 v = E::load16(src + i);
          std::memcpy(&tile[r][i], &v, sizeof(v16));
        }
        for (; i < kc; ++i) tile[r][i] = E::load1(src + i);
      }
      accumulate<NR, MV>(panel + k0 * width, rows, kc, nullptr, acc);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < MV; ++v) std::memcpy(out + r * width + 16 * v, &acc[r][v], sizeof(v16));
}

template <int NR, int MV, class E>
void tile_rows(const float* panel, const typename E::type* w, std::int64_t row, std::int64_t nr,
               std::int64_t k, float* out) {
  const typename E::type* rows[NR];
  for (std::int64_t r = 0; r < nr; ++r) rows[r] = w + (row + r) * k;
  // The last, partial tile of rows: repeat the final row (its results unused).
  for (std::int64_t r = nr; r < NR; ++r) rows[r] = rows[nr - 1];
  micro_tile<NR, MV, E>(panel, rows, k, out);
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
template <int NR, int MV, class E>
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
      tile_rows<NR, MV, E>(p + pi * k * width, w, row, nr, k, out);
      const std::int64_t rows_here = std::min(width, m - pi * width);
      for (std::int64_t j = 0; j < rows_here; ++j) {
        float* yj = y + (pi * width + j) * n + row;
        for (std::int64_t r = 0; r < nr; ++r) yj[r] = out[r * width + j];
      }
    }
  }
}

template <int NR, int MV>
void multiply_job(const float* p, std::int64_t m, std::int64_t k, const matmul_job& j) {
  with_elems(j, [&]<class E>(E, const typename E::type* w) {
    multiply_panels<NR, MV, E>(p, m, w, j.n, k, j.y);
  });
}

// x packed once for every job, one parallel region for all of them.
template <int NR, int MV>
void gemm_jobs(const float* x, std::int64_t m, std::int64_t k, std::span<const matmul_job> jobs) {
  constexpr std::int64_t width = 16 * MV;
  float* p = pack_buffer(static_cast<std::size_t>((m + width - 1) / width * k * width));
#pragma omp parallel
  {
    pack_panels(x, m, k, width, p);
    for (const auto& j : jobs) multiply_job<NR, MV>(p, m, k, j);
  }
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

void gemv_multi(const float* x, std::int64_t k, std::span<const matmul_job> jobs) {
  std::int64_t total = 0;
  for (const auto& j : jobs) total += j.n;
#pragma omp parallel if (total * k > (1 << 16))
  {
    // The rows of all jobs, end to end, cut into one contiguous slice per
    // thread (multiples of 4 rows): one fork and join for several matrices.
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t per = (total / threads + 3) / 4 * 4;
    const std::int64_t begin = std::min(total, t * per);
    const std::int64_t end = t == threads - 1 ? total : std::min(total, begin + per);
    std::int64_t offset = 0;
    for (const auto& j : jobs) {
      const std::int64_t b = std::max(begin, offset) - offset;
      const std::int64_t e = std::min(end, offset + j.n) - offset;
      if (b < e) gemv_rows_of(j, x, b, e, k);
      offset += j.n;
    }
  }
}

void gemm_multi(const float* x, std::int64_t m, std::int64_t k, std::span<const matmul_job> jobs) {
  if (m == 1)
    gemv_multi(x, k, jobs);
  else if (m <= 16)
    gemm_jobs<12, 1>(x, m, k, jobs);
  else
    gemm_jobs<6, 2>(x, m, k, jobs);
}

void gemm(const float* x, std::int64_t m, const void* w, dtype type, std::int64_t n,
          std::int64_t k, float* y) {
  const matmul_job job{w, type, n, y};
  gemm_multi(x, m, k, std::span(&job, 1));
}

} // namespace troupe
