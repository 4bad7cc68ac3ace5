#pragma once
// The KV cache's element types (scheduler.kv_cache_dtype) and what a block
// of each costs: one rule for the server's block count and the simulator's
// memory model.

#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe {

/// How cached keys and values are stored. f32: as computed. bf16, f16:
/// rounded to nearest even. q8_0: each token's head_dim values of a head in
/// blocks of 32, an F16 scale and 32 int8 values a block (ggml's Q8_0), so
/// head_dim must be a multiple of 32.
enum class kv_dtype : std::uint8_t { f32, bf16, f16, q8_0 };

constexpr auto kv_dtype_name(kv_dtype t) -> std::string_view {
  switch (t) {
    case kv_dtype::f32: return "f32";
    case kv_dtype::bf16: return "bf16";
    case kv_dtype::f16: return "f16";
    case kv_dtype::q8_0: return "q8_0";
  }
  return "?";
}

constexpr auto parse_kv_dtype(std::string_view s) -> std::optional<kv_dtype> {
  for (const auto t : {kv_dtype::f32, kv_dtype::bf16, kv_dtype::f16, kv_dtype::q8_0})
    if (kv_dtype_name(t) == s) return t;
  return std::nullopt;
}

/// Whether a head of head_dim values can be stored as t (q8_0: whole blocks of 32).
constexpr auto kv_dtype_fits(kv_dtype t, std::int64_t head_dim) -> bool {
  return t != kv_dtype::q8_0 || head_dim % 32 == 0;
}

/// Bytes of one token's keys (or values) in one KV head.
constexpr auto kv_head_bytes(kv_dtype t, std::int64_t head_dim) -> std::int64_t {
  switch (t) {
    case kv_dtype::f32: return 4 * head_dim;
    case kv_dtype::bf16:
    case kv_dtype::f16: return 2 * head_dim;
    case kv_dtype::q8_0: return head_dim / 32 * (2 + 32);
  }
  return 0;
}

/// Bytes of one KV block: keys and values of block_size tokens in every
/// layer and KV head.
constexpr auto kv_block_bytes(kv_dtype t, std::int64_t layers, std::int64_t kv_heads, std::int64_t head_dim,
                              std::int64_t block_size) -> std::int64_t {
  return 2 * layers * kv_heads * kv_head_bytes(t, head_dim) * block_size;
}

} // namespace troupe
