#pragma once
// MXFP4 (OCP Microscaling, 4-bit E2M1 values with a shared power-of-two
// scale), gpt-oss's expert weights, in ggml's block layout (type 39):
//   32 values: u8 e, u8 qs[16]  (low nibbles: values 0-15, high: 16-31)
//   x = kv[nibble] · 2^(e - 128),  kv = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
// (kv is E2M1 doubled, so the scale is halved: x = E2M1 · 2^(e - 127)).
// Hugging Face's gpt-oss checkpoints keep the same values as `*_blocks`
// (16 bytes a block; low nibble: value 2j, high: value 2j + 1) and
// `*_scales` (e) tensors.
//
// Every MXFP4 value is a small integer times a power of two, so a block is
// exactly a Q8_0 block (q = kv[nibble], d = 2^(e - 128) as F16) wherever F16
// holds the scale (e from 104 to 143; an all-zero block has d = 0): troupe
// keeps MXFP4 weights as they are stored and multiplies them as those Q8_0
// blocks (quant_gemm), so the integer dot products and the scale products
// are llama.cpp's own (it multiplies MXFP4 by x in Q8_0 blocks too).

#include <cstddef>
#include <cstdint>

namespace troupe::mxfp4 {

constexpr std::int64_t block_values = 32;
constexpr std::int64_t block_bytes = 17;

/// kv: an E2M1 code's value, doubled.
constexpr std::int8_t values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/// The scale bytes e whose 2^(e - 128) F16 holds (2^-24 to 2^15): the
/// blocks to_q8_0 takes, besides all-zero ones.
constexpr std::uint8_t q8_0_min_e = 104, q8_0_max_e = 143;

/// n values (whole blocks) of ggml MXFP4 at src into dst.
void dequantize(const std::byte* src, float* dst, std::int64_t n);

/// n values (whole blocks) into ggml MXFP4, as ggml quantizes: e from the
/// block's largest magnitude (floor(log2 amax) - 2 + 127), each value the
/// nearest kv · 2^(e - 128), the first of equals.
void quantize(const float* x, std::byte* dst, std::int64_t n);

/// n values (whole blocks) of ggml MXFP4 as Q8_0 (34 bytes a block),
/// exactly. Returns false, writing nothing more, at the first block whose
/// scale F16 cannot hold.
auto to_q8_0(const std::byte* src, std::byte* dst, std::int64_t n) -> bool;

/// Whether to_q8_0 takes these n values (every non-zero block's scale in
/// F16's range), reading them only.
auto exact_in_q8_0(const std::byte* src, std::int64_t n) -> bool;

/// One row of a Hugging Face checkpoint (blocks: 16 bytes a block, scales:
/// one byte a block) of n values as ggml MXFP4 blocks.
void from_hf(const std::uint8_t* blocks, const std::uint8_t* scales, std::byte* dst, std::int64_t n);

} // namespace troupe::mxfp4
