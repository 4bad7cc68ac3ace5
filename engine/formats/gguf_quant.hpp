#pragma once
// Dequantization of ggml's block formats, one row at a time, to F32: the
// reference every quantized kernel is checked against, and what a loader
// uses for the tensors it keeps in F32 (norms, embeddings rows).
//
// The layouts (all little-endian, d and dmin F16 unless said):
//   Q8_0  32 values: d, int8 q[32]                          x = d * q
//   Q4_0  32 values: d, u8 qs[16]   (low nibbles: values 0-15, high: 16-31)
//                                                            x = d * (nibble - 8)
//   Q5_0  32 values: d, u32 qh, u8 qs[16]: Q4_0's nibbles with bit i of qh
//         as value i's fifth bit                            x = d * (q - 16)
//   Q4_K 256 values: d, dmin, u8 scales[12], u8 qs[128]; 8 sub-blocks of 32,
//        each a 6-bit scale and min packed in scales[12];   x = d*sc * q - dmin*m
//   Q5_K 256 values: d, dmin, scales[12], u8 qh[32], qs[128]: Q4_K's nibbles
//        with a fifth bit from qh
//   Q6_K 256 values: u8 ql[128], u8 qh[64], int8 scales[16], d; 16 sub-blocks
//        of 16, 6-bit values centred on 32:                  x = d * sc * (q - 32)
//   MXFP4 32 values: u8 e, u8 qs[16] (see mxfp4.hpp)         x = kv[nibble] * 2^(e - 128)

#include "base/dtype.hpp"
#include "engine/formats/gguf.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace troupe::gguf {

/// The F16 at p (a block's scale), as float.
inline auto half_at(const std::byte* p) -> float { return load_as_f32(dtype::f16, p, 0); }

/// Whether dequantize_row reads this type.
auto can_dequantize(tensor_type t) -> bool;

/// n values of type t from src (n a multiple of the type's block) into dst.
/// Throws std::invalid_argument for a type can_dequantize refuses.
void dequantize_row(tensor_type t, const std::byte* src, float* dst, std::int64_t n);

/// Whether quantize_row writes this type.
auto can_quantize(tensor_type t) -> bool;

/// n values of x (n a multiple of the type's block) into dst as type t:
/// Q8_0, Q4_0, Q4_K, Q5_K, Q6_K or MXFP4, round-to-nearest with the scales a block's
/// extremes give (deterministic; not llama.cpp's iterative search, so the
/// bytes differ from its quantizer's, and any reader of the format reads
/// them). Throws std::invalid_argument for another type or a partial block.
void quantize_row(tensor_type t, const float* x, std::byte* dst, std::int64_t n);

/// n values of Q5_0 as Q8_0, exactly: the same F16 scale, q - 16 as the
/// int8 (llama-quantize writes Q5_0 where a Q4_K row is not whole 256-value
/// blocks; the Q8_0 kernels then compute what a Q5_0 kernel would, as
/// llama.cpp also multiplies Q5_0 by x in Q8_0 blocks). Throws
/// std::invalid_argument for a partial block.
void q5_0_to_q8_0(const std::byte* src, std::byte* dst, std::int64_t n);

/// Q4_K's and Q5_K's packed scales: sub-block j's (0-7) 6-bit scale and min.
void k_scale_min(int j, const std::uint8_t* scales, std::uint8_t& scale, std::uint8_t& min);

} // namespace troupe::gguf
