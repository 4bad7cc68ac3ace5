#pragma once
// Matrix products with ggml's quantized weights: y = x · Wᵀ, x and y F32, W
// rows as a GGUF file stores them (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K), used in
// place. As in llama.cpp, each row of x is first quantized to 8 bits per
// block, then multiplied in integers:
//   Q8_0, Q4_0 weights: blocks of 32 values, d = amax/127 rounded to F16 (as
//                       llama.cpp's Q8_0 keeps it), q = round(x·127/amax);
//   K-quant weights:    blocks of 256 values, the same rule, and the sums of
//                       q per 16 values (they fold the K-quants' mins and
//                       Q6_K's offset of 32 into integers).
// Each weight block's dot product with x's block is then an exact integer.
//
// Batch invariance, and the same bits on every instruction set: every output
// y[i, j] is one chain of float operations over the weight blocks b in
// ascending order, from zero:
//   Q8_0, Q4_0, Q6_K: acc = fma(dw_b · dx_b, float(dot_b), acc)
//   Q4_K, Q5_K:       acc = fma(d_b · dx_b, float(dot_b), acc);
//                     acc = fma(dmin_b · dx_b, float(-Σ_j min_j · Σ_{v∈j} q_v), acc)
// whatever m, the row's place in x, the thread count or the ISA path. So a
// row of x gives the same bits alone (decode at batch 1) as in any batch.
//
// Kernels: 16 weight rows at a time (8 on AVX2) are read once, their blocks
// rearranged in L1 so that a vector holds 4 values of each row, and
// multiplied by up to 8 rows of x at a time (vpdpbusd on AVX-512 VNNI,
// vpmaddubsw on AVX2), x's 4 values broadcast: a matrix-matrix product
// for any m; parallel over weight rows with OpenMP (set_cpu_threads).
// Past 8 rows on VNNI, Q8_0 and Q4_0 multiply x as unsigned bytes by
// signed weights, so that the offset's correction is the weights' own and
// shared by every row of x; the K-quants' mins go through vpdpwssd. And a
// batch of whole slabs of 32 rows (decode at batch 32, 64, ...; prefill
// chunks) turns round on VNNI: x is transposed once, a row of x a lane,
// and 6 weight rows are broadcast against 2 vectors of x
// (quant_batch_tiles.hpp). And at m = 1 (decode at batch 1) on AVX-512,
// Q4_K and Q6_K rows are read one at a time, straight, with no transpose
// (row kernels, quant_kernels_avx512.cpp): on Zen 4 their tiles' decode,
// not the bytes, bounded m = 1. The tiles stream the next tile into L2 as
// they go. The integer sums are the same, so are the bits.

#include "engine/formats/gguf.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace troupe {

/// Whether quant_gemm multiplies weights of this type (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K).
auto quant_gemm_supports(gguf::tensor_type t) -> bool;

/// One weight of a quant_gemm_multi: w is n rows of k values, each row whole
/// ggml blocks of `type`, rows contiguous as in a GGUF file.
struct quant_job {
  const std::byte* w;
  gguf::tensor_type type;
  std::int64_t n;
  float* y; ///< [m, n]
};

/// y[m, n] = x[m, k] · w[n, k]ᵀ, x and y row-major F32 (not aliasing). k is
/// a multiple of the type's block (32 or 256), `type` one quant_gemm_supports
/// takes. Each weight byte is read from memory once.
void quant_gemm(const float* x, std::int64_t m, const std::byte* w, gguf::tensor_type type, std::int64_t n,
                std::int64_t k, float* y);

/// Several weights sharing x (q/k/v, gate/up; at most 4): x is quantized once
/// per block scheme, one parallel region. Each y equals quant_gemm's, bitwise.
void quant_gemm_multi(const float* x, std::int64_t m, std::int64_t k, std::span<const quant_job> jobs);

/// The instruction set the kernels run with: "avx512-vnni", "avx2" or
/// "generic"; chosen once from the CPU (__builtin_cpu_supports), overridable
/// by the environment variable TROUPE_CPU_ISA=avx2|generic (tests and
/// benchmarks on an AVX-512 machine; an unknown or unsupported value is a
/// one-line std::runtime_error, thrown by the first call).
auto quant_isa() -> std::string_view;

} // namespace troupe
