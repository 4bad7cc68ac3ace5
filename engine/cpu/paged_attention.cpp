#include "engine/cpu/paged_attention.hpp"

#include "engine/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace troupe {

paged_kv_cache::paged_kv_cache(std::int64_t num_layers, std::int32_t num_blocks,
                               std::int32_t block_size, std::int64_t num_kv_heads,
                               std::int64_t head_dim)
  : row_floats_(num_kv_heads * head_dim),
    layer_floats_(2 * static_cast<std::int64_t>(num_blocks) * block_size * num_kv_heads * head_dim),
    num_blocks_(num_blocks),
    block_size_(block_size),
    storage_(static_cast<std::size_t>(num_layers * layer_floats_)) {
  TROUPE_CHECK(block_size > 0 && num_blocks > 0, "KV cache needs blocks");
}

auto paged_kv_cache::key(std::int64_t layer, block_id b, std::int32_t slot) -> float* {
  return storage_.data() + layer * layer_floats_ +
         (static_cast<std::int64_t>(b) * block_size_ + slot) * row_floats_;
}

auto paged_kv_cache::value(std::int64_t layer, block_id b, std::int32_t slot) -> float* {
  return key(layer, b, slot) + layer_floats_ / 2;
}

void write_kv(paged_kv_cache& cache, std::int64_t layer, std::span<const attention_row> rows,
              const float* k, const float* v) {
  const std::int32_t bs = cache.block_size();
  for (std::size_t t = 0; t < rows.size(); ++t) {
    const auto& r = rows[t];
    const auto bi = static_cast<std::size_t>(r.position / bs);
    TROUPE_CHECK(bi < r.block_table.size(), "block table too short for position");
    const block_id b = r.block_table[bi];
    TROUPE_CHECK(b >= 0 && b < cache.num_blocks(), "block id out of range");
    const auto n = static_cast<std::size_t>(cache.row_floats());
    std::memcpy(cache.key(layer, b, r.position % bs), k + t * n, n * sizeof(float));
    std::memcpy(cache.value(layer, b, r.position % bs), v + t * n, n * sizeof(float));
  }
}

void paged_attention(paged_kv_cache& cache, std::int64_t layer,
                     std::span<const attention_row> rows, const float* q, std::int64_t num_heads,
                     std::int64_t num_kv_heads, std::int64_t head_dim, float* out) {
  const std::int64_t num_rows = static_cast<std::int64_t>(rows.size());
  const std::int64_t group = num_heads / num_kv_heads;
  const std::int32_t bs = cache.block_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
#pragma omp parallel
  {
    std::vector<float> scores;
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (std::int64_t t = 0; t < num_rows; ++t)
      for (std::int64_t h = 0; h < num_heads; ++h) {
        const auto& r = rows[static_cast<std::size_t>(t)];
        const std::int64_t kvh = h / group;
        const float* qh = q + (t * num_heads + h) * head_dim;
        float* oh = out + (t * num_heads + h) * head_dim;
        const std::int32_t n = r.position + 1;
        scores.resize(static_cast<std::size_t>(n));
        float max_score = -INFINITY;
        for (std::int32_t j = 0; j < n; ++j) {
          const float* kj =
              cache.key(layer, r.block_table[static_cast<std::size_t>(j / bs)], j % bs) +
              kvh * head_dim;
          float s = 0.0f;
#pragma omp simd reduction(+ : s)
          for (std::int64_t i = 0; i < head_dim; ++i) s += qh[i] * kj[i];
          s *= scale;
          scores[static_cast<std::size_t>(j)] = s;
          max_score = std::max(max_score, s);
        }
        float sum = 0.0f;
        for (auto& s : scores) {
          s = std::exp(s - max_score);
          sum += s;
        }
        std::memset(oh, 0, static_cast<std::size_t>(head_dim) * sizeof(float));
        for (std::int32_t j = 0; j < n; ++j) {
          const float* vj =
              cache.value(layer, r.block_table[static_cast<std::size_t>(j / bs)], j % bs) +
              kvh * head_dim;
          const float p = scores[static_cast<std::size_t>(j)] / sum;
#pragma omp simd
          for (std::int64_t i = 0; i < head_dim; ++i) oh[i] += p * vj[i];
        }
      }
  }
}

} // namespace troupe
