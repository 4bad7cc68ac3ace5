#include "engine/cpu/quant_gemm.hpp"

#include "base/check.hpp"
#include "engine/cpu/quant_kernels.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

namespace troupe {
namespace quant {

auto kernel_set::get(gguf::tensor_type t, bool batched) const -> tile_kernel {
  switch (t) {
    case gguf::tensor_type::q8_0: return batched ? q8_0_t : q8_0;
    case gguf::tensor_type::q4_0: return batched ? q4_0_t : q4_0;
    case gguf::tensor_type::q4_k: return batched ? q4_k_t : q4_k;
    case gguf::tensor_type::q5_k: return batched ? q5_k_t : q5_k;
    case gguf::tensor_type::q6_k: return batched ? q6_k_t : q6_k;
    case gguf::tensor_type::mxfp4: return batched ? mxfp4_t : mxfp4;
    default: return nullptr;
  }
}

// Whole slabs only: a partial slab, padded or passed to the other kernels,
// ran 3-9% slower than the other kernels alone (m = 40 to 56, Q8_0 and
// Q4_K, one thread), and past m = 128 the two ran alike.
auto kernel_set::batch(std::int64_t m) const -> bool {
  return q8_0_t != nullptr && m > 0 && m % batch_slab == 0;
}

auto kernels_named(std::string_view name) -> const kernel_set& {
  if (name == "generic") return generic_kernels();
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (name == "avx2") {
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return avx2_kernels();
    throw std::runtime_error("TROUPE_CPU_ISA=avx2: this CPU has no AVX2 and FMA");
  }
  if (name == "avx512-vnni") {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
      return avx512_kernels();
    throw std::runtime_error("TROUPE_CPU_ISA=avx512-vnni: this CPU has no AVX-512 VNNI");
  }
#endif
  throw std::runtime_error("TROUPE_CPU_ISA=" + std::string(name) +
                           ": unknown instruction set (avx512-vnni, avx2 or generic)");
}

namespace {

std::atomic<const kernel_set*> chosen{nullptr};

// TROUPE_CPU_ISA, else the best the CPU runs. Not kept when it throws, so
// every later call reports the same bad value.
auto current() -> const kernel_set& {
  if (const auto* k = chosen.load(std::memory_order_acquire)) return *k;
  const char* env = std::getenv("TROUPE_CPU_ISA");
  const kernel_set* k = nullptr;
  if (env != nullptr && *env != '\0') {
    k = &kernels_named(env);
  } else {
    for (const char* name : {"avx512-vnni", "avx2", "generic"}) {
      try {
        k = &kernels_named(name);
        break;
      } catch (const std::runtime_error&) {
      }
    }
  }
  chosen.store(k, std::memory_order_release);
  return *k;
}

struct free_deleter {
  void operator()(std::byte* p) const { std::free(p); }
};

// The buffers of one quantized x (acts' arrays, writable), carved from one
// scratch slot.
struct act_buffers {
  acts a;
  std::int8_t* q;
  float* d;
  std::int32_t* neg_sum16;
  std::int32_t* neg_sum32;
  std::uint8_t* u;
  std::int16_t* neg_sum32_h;
  std::int32_t* qt;
  float* dt;
  std::int32_t* ns16t;
  std::int32_t* ns32t;
  std::int32_t* ns32pt;
  std::int64_t block;
};

// Row x[0, k) into q (blocks of `block`), d and the negated sums of 32 (and
// of 16 where neg16 is not null). Apart from the arrays it writes, so that
// its loops vectorize.
void quantize_row(const float* __restrict x, std::int64_t k, std::int64_t block, std::int8_t* __restrict q,
                  float* __restrict d, std::int32_t* __restrict neg16, std::int32_t* __restrict neg32) {
  for (std::int64_t j = 0; j < k / block; ++j) {
    const float* xb = x + j * block;
    std::int8_t* qb = q + j * block;
    // The largest |x| as the largest magnitude's bits (their order is the
    // floats' for all but NaN).
    std::uint32_t amax_bits = 0;
    for (std::int64_t v = 0; v < block; ++v)
      amax_bits = std::max(amax_bits, std::bit_cast<std::uint32_t>(xb[v]) & 0x7FFFFFFFu);
    const float amax = std::bit_cast<float>(amax_bits);
    // At most the largest float: for amax below 127 / FLT_MAX the inverse
    // would be infinite, and 0 · inf NaN.
    const float id = amax > 0.0f ? std::min(127.0f / amax, std::numeric_limits<float>::max()) : 0.0f;
    // Blocks of 32 keep their scale in F16, as llama.cpp's Q8_0 does
    // (_Float16: the conversion instruction, rounding to nearest even as
    // f32_to_f16 does).
    d[j] = block == 32 ? static_cast<float>(static_cast<_Float16>(amax / 127.0f)) : amax / 127.0f;
    // Sixteen at a time (a vector of floats), with their sum. |x · id| is
    // at most 127 and a rounding, below 127.5: q needs no clamp.
    for (std::int64_t v0 = 0; v0 < block; v0 += 16) {
      std::int32_t qv[16];
      for (int v = 0; v < 16; ++v) qv[v] = static_cast<std::int32_t>(std::nearbyint(xb[v0 + v] * id));
      for (int v = 0; v < 16; ++v) qb[v0 + v] = static_cast<std::int8_t>(qv[v]);
      std::int32_t sum = 0;
      for (int v = 0; v < 16; ++v) sum += qv[v];
      const std::int64_t s = (j * block + v0) / 16;
      if (neg16 != nullptr) neg16[s] = -sum;
      if (s % 2 == 0)
        neg32[s / 2] = -sum;
      else
        neg32[s / 2] -= sum;
    }
  }
}

// Inside a parallel region: the rows of x quantized in blocks of b.block
// (quant_gemm.hpp's rule) into b's arrays, rows shared among the team;
// ends in a barrier. The scale and its inverse are IEEE divisions and q a
// round-to-nearest-even, so every ISA path reads the same bytes.
void quantize(const float* x, const act_buffers& b) {
  const std::int64_t m = b.a.m, k = b.a.k, block = b.block;
#pragma omp for schedule(static)
  for (std::int64_t i = 0; i < m; ++i) {
    std::int32_t* neg32 = b.neg_sum32 + i * (k / 32);
    quantize_row(x + i * k, k, block, b.q + i * k, b.d + i * (k / block),
                 b.neg_sum16 != nullptr ? b.neg_sum16 + i * (k / 16) : nullptr, neg32);
    if (b.neg_sum32_h != nullptr)
      for (std::int64_t s = 0; s < k / 32; ++s) b.neg_sum32_h[i * (k / 32) + s] = static_cast<std::int16_t>(neg32[s]);
    if (b.u != nullptr)
      for (std::int64_t v = 0; v < k; ++v) b.u[i * k + v] = static_cast<std::uint8_t>(b.q[i * k + v] + 128);
    if (b.qt == nullptr) continue;
    std::int32_t* const qt = b.qt + lane_index(i, 0, k / 4);
    const std::int8_t* const qi = b.q + i * k;
    for (std::int64_t g = 0; g < k / 4; ++g) std::memcpy(qt + g * batch_slab, qi + 4 * g, 4);
    for (std::int64_t j = 0; j < k / block; ++j) b.dt[lane_index(i, j, k / block)] = b.d[i * (k / block) + j];
    if (b.ns32t != nullptr)
      for (std::int64_t s = 0; s < k / 32; ++s) b.ns32t[lane_index(i, s, k / 32)] = neg32[s];
    if (b.ns16t != nullptr)
      for (std::int64_t s = 0; s < k / 16; ++s) b.ns16t[lane_index(i, s, k / 16)] = b.neg_sum16[i * (k / 16) + s];
    if (b.ns32pt != nullptr)
      for (std::int64_t s = 0; s < k / 64; ++s)
        b.ns32pt[lane_index(i, s, k / 64)] = static_cast<std::int32_t>(static_cast<std::uint16_t>(neg32[2 * s]) |
                                                                      static_cast<std::uint32_t>(neg32[2 * s + 1]) << 16);
  }
}

// With u (q + 128) and/or sums32_h (neg_sum32 as int16) where the kernels
// read them, and the transposed arrays where the batch kernels run.
auto make_acts(int slot, std::int64_t m, std::int64_t k, std::int64_t block, bool with_u, bool with_sums32_h,
               bool transposed) -> act_buffers {
  const auto round = [](std::int64_t bytes) { return static_cast<std::size_t>(bytes + 63) / 64 * 64; };
  const std::int64_t ms = transposed ? m : 0;
  const bool k_block = block == 256;
  // The arrays in order, each 64-byte aligned.
  const std::size_t sizes[] = {
      round(m * k),                                     // q
      with_u ? round(m * k) : 0,                        // u
      round(m * (k / block) * 4),                       // d
      k_block ? round(m * (k / 16) * 4) : 0,            // neg_sum16
      round(m * (k / 32) * 4),                          // neg_sum32
      with_sums32_h ? round(m * (k / 32) * 2) : 0,      // neg_sum32_h
      round(ms * k),                                    // qt
      round(ms * (k / block) * 4),                      // dt
      k_block ? round(ms * (k / 16) * 4) : 0,           // ns16t
      k_block ? 0 : round(ms * (k / 32) * 4),           // ns32t
      k_block ? round(ms * (k / 64) * 4) : 0,           // ns32pt
  };
  std::size_t total = 0;
  for (const auto n : sizes) total += n;
  std::byte* p = scratch(slot, total);
  std::byte* at[std::size(sizes)];
  for (std::size_t j = 0; j < std::size(sizes); ++j) {
    at[j] = sizes[j] > 0 ? p : nullptr;
    p += sizes[j];
  }
  act_buffers b{};
  b.block = block;
  b.q = reinterpret_cast<std::int8_t*>(at[0]);
  b.u = reinterpret_cast<std::uint8_t*>(at[1]);
  b.d = reinterpret_cast<float*>(at[2]);
  b.neg_sum16 = reinterpret_cast<std::int32_t*>(at[3]);
  b.neg_sum32 = reinterpret_cast<std::int32_t*>(at[4]);
  b.neg_sum32_h = reinterpret_cast<std::int16_t*>(at[5]);
  // Null where not transposed: their sizes are zero.
  b.qt = reinterpret_cast<std::int32_t*>(at[6]);
  b.dt = reinterpret_cast<float*>(at[7]);
  b.ns16t = reinterpret_cast<std::int32_t*>(at[8]);
  b.ns32t = reinterpret_cast<std::int32_t*>(at[9]);
  b.ns32pt = reinterpret_cast<std::int32_t*>(at[10]);
  b.a = {b.q, b.d, b.neg_sum16, b.neg_sum32, b.u, b.neg_sum32_h, m, k, b.qt, b.dt, b.ns16t, b.ns32t, b.ns32pt};
  return b;
}

auto block_of(gguf::tensor_type t) -> std::int64_t {
  return t == gguf::tensor_type::q8_0 || t == gguf::tensor_type::q4_0 || t == gguf::tensor_type::mxfp4 ? 32 : 256;
}

} // namespace

void use_kernels(std::string_view name) { chosen.store(&kernels_named(name), std::memory_order_release); }

auto scratch(int slot, std::size_t n) -> std::byte* {
  constexpr int num_slots = 5;
  TROUPE_CHECK(slot >= 0 && slot < num_slots, "quant::scratch: no such slot");
  thread_local std::unique_ptr<std::byte[], free_deleter> bufs[num_slots];
  thread_local std::size_t capacity[num_slots] = {};
  if (n > capacity[slot]) {
    const std::size_t bytes = (n + 63) / 64 * 64;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, bytes));
    if (p == nullptr) throw std::bad_alloc();
    bufs[slot].reset(p);
    capacity[slot] = bytes;
  }
  return bufs[slot].get();
}

} // namespace quant

auto quant_gemm_supports(gguf::tensor_type t) -> bool {
  switch (t) {
    case gguf::tensor_type::q8_0:
    case gguf::tensor_type::q4_0:
    case gguf::tensor_type::q4_k:
    case gguf::tensor_type::q5_k:
    case gguf::tensor_type::q6_k:
    case gguf::tensor_type::mxfp4: return true;
    default: return false;
  }
}

auto quant_isa() -> std::string_view { return quant::current().name; }

void quant_gemm_multi(const float* x, std::int64_t m, std::int64_t k, std::span<const quant_job> jobs) {
  if (m <= 0 || jobs.empty()) return;
  TROUPE_CHECK(jobs.size() <= 4, "quant_gemm_multi takes at most 4 weights");
  const auto& ks = quant::current();
  bool need32 = false, need256 = false;
  for (const auto& j : jobs) {
    TROUPE_CHECK(quant_gemm_supports(j.type), "quant_gemm: unsupported weight type");
    TROUPE_CHECK(k % quant::block_of(j.type) == 0, "quant_gemm: k is not whole blocks of the weight type");
    (quant::block_of(j.type) == 32 ? need32 : need256) = true;
  }
  // Slots 0 and 1 on the calling thread; the kernels use slots 2 and 3 of
  // their own.
  const bool batch = ks.batch(m);
  const bool want_u = ks.vnni && m > ks.mr_small && !batch;
  const auto a32 = need32 ? quant::make_acts(0, m, k, 32, want_u, false, batch) : quant::act_buffers{};
  const auto a256 = need256 ? quant::make_acts(1, m, k, 256, false, ks.vnni && !batch, batch) : quant::act_buffers{};
#pragma omp parallel
  {
    if (need32) quant::quantize(x, a32);
    if (need256) quant::quantize(x, a256);
    for (const auto& j : jobs) {
      const auto tr = *gguf::traits(static_cast<std::uint32_t>(j.type));
      const std::int64_t row_bytes = k / tr.block_elements * tr.block_bytes;
      const quant::tile_kernel kernel = ks.get(j.type, batch);
      const quant::acts& a = quant::block_of(j.type) == 32 ? a32.a : a256.a;
      const std::int64_t rows = batch ? ks.batch_rows : ks.rows;
      const std::int64_t num_tiles = (j.n + rows - 1) / rows;
#pragma omp for schedule(static) nowait
      for (std::int64_t t = 0; t < num_tiles; ++t)
        kernel(j.w, row_bytes, t * rows, std::min(rows, j.n - t * rows), a, j.y, j.n);
    }
  }
}

void quant_gemm(const float* x, std::int64_t m, const std::byte* w, gguf::tensor_type type, std::int64_t n,
                std::int64_t k, float* y) {
  const quant_job job{w, type, n, y};
  quant_gemm_multi(x, m, k, std::span(&job, 1));
}

} // namespace troupe
