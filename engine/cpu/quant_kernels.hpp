#pragma once
// Inside quant_gemm: x quantized to 8 bits per block, the per-ISA tile
// kernels that multiply it by weight rows, and the hook that picks an ISA.

#include "engine/formats/gguf.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace troupe::quant {

/// m rows of x quantized in blocks of `block` (32 or 256) values: x[i, v] ≈
/// d[i, v / block] · q[i, v]. The sums are negated, ready to be added:
/// neg_sum16/32[i, s] = -Σ q over values [16s, 16s + 16) / [32s, 32s + 32).
/// u holds q + 128 as unsigned bytes, for kernels that multiply unsigned x
/// by signed weights (decode_signed, on VNNI). Each is null where no
/// kernel reads it.
struct acts {
  const std::int8_t* q;            // [m, k]
  const float* d;                  // [m, k / block]
  const std::int32_t* neg_sum16;   // [m, k / 16]; 256-blocks only
  const std::int32_t* neg_sum32;   // [m, k / 32]
  const std::uint8_t* u;           // [m, k]; where kernel_set::vnni, m > mr_small and not batch(m)
  const std::int16_t* neg_sum32_h; // [m, k / 32] as int16 (|Σ| <= 4064); 256-blocks on VNNI, not batch(m)
  std::int64_t m = 0;
  std::int64_t k = 0;
  // The same for the batch kernels (where kernel_set::batch(m); else
  // null), transposed: rows of x in lanes, element (i, j) at
  // lane_index(i, j, columns).
  const std::int32_t* qt = nullptr;     // k / 4 columns: values 4j..4j+3 of each row
  const float* dt = nullptr;            // k / block
  const std::int32_t* ns16t = nullptr;  // k / 16; 256-blocks
  const std::int32_t* ns32t = nullptr;  // k / 32; 32-blocks
  const std::int32_t* ns32pt = nullptr; // k / 64: neg_sum32 2j and 2j + 1 as int16 pairs; 256-blocks
};

/// Rows of x a vector of the batch kernels holds, and a slab (two vectors).
constexpr std::int64_t batch_lanes = 16, batch_slab = 2 * batch_lanes;

/// Where (row i, column j) of a transposed array of acts lives: slab after
/// slab, each [columns][batch_slab], so that a slab's rows are contiguous.
constexpr auto lane_index(std::int64_t i, std::int64_t j, std::int64_t columns) -> std::int64_t {
  return (i / batch_slab) * columns * batch_slab + j * batch_slab + i % batch_slab;
}

/// Rows [row0, row0 + nr) of the weight w (each row_bytes long) times every
/// row of x into y (row stride ldy): y[i, row0 + r] for i < a.m.
using tile_kernel = void (*)(const std::byte* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t nr,
                             const acts& a, float* y, std::int64_t ldy);

/// One ISA's kernels, each taking up to `rows` weight rows a call.
struct kernel_set {
  std::string_view name;
  std::int64_t rows = 0;
  tile_kernel q8_0 = nullptr, q4_0 = nullptr, q4_k = nullptr, q5_k = nullptr, q6_k = nullptr;
  tile_kernel mxfp4 = nullptr;
  /// VNNI kernels read acts::neg_sum32_h, and acts::u past mr_small rows.
  bool vnni = false;
  std::int64_t mr_small = 0;
  /// The batch kernels, where the ISA has them (null: none), for x in
  /// whole slabs of batch_slab rows (batch(m)); they read x transposed
  /// (acts::qt and the rest).
  tile_kernel q8_0_t = nullptr, q4_0_t = nullptr, q4_k_t = nullptr, q5_k_t = nullptr, q6_k_t = nullptr,
              mxfp4_t = nullptr;
  std::int64_t batch_rows = 0; ///< weight rows a batch kernel call takes at most

  /// The kernel for type t: the batch kernel where `batched`.
  auto get(gguf::tensor_type t, bool batched = false) const -> tile_kernel;
  auto batch(std::int64_t m) const -> bool;
};

auto generic_kernels() -> const kernel_set&;
#if defined(__x86_64__)
auto avx2_kernels() -> const kernel_set&;
auto avx512_kernels() -> const kernel_set&;
#endif

/// The kernels named "avx512-vnni", "avx2" or "generic"; a one-line
/// std::runtime_error for another name or one this CPU cannot run.
auto kernels_named(std::string_view name) -> const kernel_set&;

/// Makes quant_gemm run `name`'s kernels from now on (kernels_named's
/// errors): the tests compare the ISA paths in one process.
void use_kernels(std::string_view name);

/// The calling thread's scratch buffer of at least n bytes, 64-byte aligned,
/// kept between calls. `slot` separates buffers used at the same time.
auto scratch(int slot, std::size_t n) -> std::byte*;

} // namespace troupe::quant
