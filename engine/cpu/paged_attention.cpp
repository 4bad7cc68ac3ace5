#include "engine/cpu/paged_attention.hpp"

#include "base/check.hpp"
#include "engine/cpu/huge_pages.hpp"
#include "base/dtype.hpp"
#include "engine/formats/gguf_quant.hpp"
#include "base/vec_exp.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace troupe {

paged_kv_cache::paged_kv_cache(std::int64_t num_layers, std::int32_t num_blocks,
                               std::int32_t block_size, std::int64_t num_kv_heads,
                               std::int64_t head_dim, kv_dtype type)
  : type_(type),
    num_layers_(num_layers),
    num_kv_heads_(num_kv_heads),
    head_dim_(head_dim),
    num_blocks_(num_blocks),
    block_size_(block_size),
    tile_bytes_(kv_head_bytes(type, head_dim) * block_size),
    layer_bytes_(2 * static_cast<std::int64_t>(num_blocks) * num_kv_heads * tile_bytes_),
    // Attention touches a few KiB in each of many blocks: with 4 KiB pages
    // nearly every block would cost a TLB miss.
    mapping_(map_huge_pages(static_cast<std::size_t>(num_layers * layer_bytes_))),
    storage_(mapping_.get()) {
  TROUPE_CHECK(block_size > 0 && num_blocks > 0, "KV cache needs blocks");
  TROUPE_CHECK(kv_dtype_fits(type, head_dim), "a Q8_0 KV cache needs head_dim a multiple of 32");
  TROUPE_CHECK(type != kv_dtype::q8_0 || head_dim <= 1024, "a Q8_0 KV cache needs head_dim at most 1024");
}

void paged_kv_cache::save_block(block_id b, std::byte* dst) const {
  TROUPE_CHECK(b >= 0 && b < num_blocks_, "block id out of range");
  const auto n = static_cast<std::size_t>(num_kv_heads_ * tile_bytes_); // one block's keys in one layer
  for (std::int64_t l = 0; l < num_layers_; ++l) {
    std::memcpy(dst, key_tile(l, b, 0), n);
    std::memcpy(dst + n, value_tile(l, b, 0), n);
    dst += 2 * n;
  }
}

void paged_kv_cache::load_block(block_id b, const std::byte* src) {
  TROUPE_CHECK(b >= 0 && b < num_blocks_, "block id out of range");
  const auto n = static_cast<std::size_t>(num_kv_heads_ * tile_bytes_);
  for (std::int64_t l = 0; l < num_layers_; ++l) {
    std::memcpy(key_tile(l, b, 0), src, n);
    std::memcpy(value_tile(l, b, 0), src + n, n);
    src += 2 * n;
  }
}

void paged_kv_cache::write(std::int64_t layer, block_id b, std::int64_t kv_head, std::int32_t slot, const float* k,
                           const float* v) {
  const std::int64_t hd = head_dim_, bs = block_size_;
  std::byte* kt = key_tile(layer, b, kv_head);
  std::byte* vt = value_tile(layer, b, kv_head);
  // Keys go down a column of the [head_dim, block_size] tile, values along a row.
  const auto narrow16 = [&](auto narrow) {
    for (std::int64_t i = 0; i < hd; ++i) {
      const std::uint16_t hk = narrow(k[i]), hv = narrow(v[i]);
      std::memcpy(kt + 2 * (i * bs + slot), &hk, 2);
      std::memcpy(vt + 2 * (slot * hd + i), &hv, 2);
    }
  };
  switch (type_) {
    case kv_dtype::f32:
      for (std::int64_t i = 0; i < hd; ++i) std::memcpy(kt + 4 * (i * bs + slot), k + i, 4);
      std::memcpy(vt + 4 * slot * hd, v, static_cast<std::size_t>(hd) * 4);
      break;
    case kv_dtype::bf16: narrow16(f32_to_bf16); break;
    case kv_dtype::f16: narrow16(f32_to_f16); break;
    case kv_dtype::q8_0: {
      const auto row = kv_head_bytes(type_, hd);
      gguf::quantize_row(gguf::tensor_type::q8_0, k, kt + slot * row, hd);
      gguf::quantize_row(gguf::tensor_type::q8_0, v, vt + slot * row, hd);
      break;
    }
  }
}

namespace {

// Elements [from, to) of a 16-bit tile widen in the F32 tile's layout.
template <class Widen>
void widen16(const std::byte* tile, std::int64_t from, std::int64_t to, Widen widen, float* out) {
  for (std::int64_t i = from; i < to; ++i) {
    std::uint16_t h;
    std::memcpy(&h, tile + 2 * i, 2);
    out[i] = widen(h);
  }
}

// The hardware's conversion where the compiler has one (F16C): exact, as
// f16_to_f32 is, and it vectorizes.
auto widen_f16(std::uint16_t h) -> float { return static_cast<float>(std::bit_cast<_Float16>(h)); }

} // namespace

auto paged_kv_cache::keys(std::int64_t layer, block_id b, std::int64_t kv_head, float* scratch, std::int32_t lo,
                          std::int32_t hi) const -> const float* {
  const std::byte* t = key_tile(layer, b, kv_head);
  const std::int64_t hd = head_dim_, bs = block_size_;
  if (hi < 0) hi = block_size_;
  switch (type_) {
    case kv_dtype::f32: return reinterpret_cast<const float*>(t);
    case kv_dtype::bf16:
      for (std::int64_t i = 0; i < hd; ++i) widen16(t, i * bs + lo, i * bs + hi, bf16_to_f32, scratch);
      break;
    case kv_dtype::f16:
      for (std::int64_t i = 0; i < hd; ++i) widen16(t, i * bs + lo, i * bs + hi, widen_f16, scratch);
      break;
    case kv_dtype::q8_0: {
      // Per token in the tile; transposed into [head_dim, block_size].
      float row[1024];
      const auto bytes = kv_head_bytes(type_, hd);
      for (std::int64_t j = lo; j < hi; ++j) {
        gguf::dequantize_row(gguf::tensor_type::q8_0, t + j * bytes, row, hd);
        for (std::int64_t i = 0; i < hd; ++i) scratch[i * bs + j] = row[i];
      }
      break;
    }
  }
  return scratch;
}

auto paged_kv_cache::values(std::int64_t layer, block_id b, std::int64_t kv_head, float* scratch, std::int32_t lo,
                            std::int32_t hi) const -> const float* {
  const std::byte* t = value_tile(layer, b, kv_head);
  const std::int64_t hd = head_dim_;
  if (hi < 0) hi = block_size_;
  switch (type_) {
    case kv_dtype::f32: return reinterpret_cast<const float*>(t);
    case kv_dtype::bf16: widen16(t, lo * hd, hi * hd, bf16_to_f32, scratch); break;
    case kv_dtype::f16: widen16(t, lo * hd, hi * hd, widen_f16, scratch); break;
    case kv_dtype::q8_0: {
      const auto bytes = kv_head_bytes(type_, hd);
      gguf::dequantize_row(gguf::tensor_type::q8_0, t + lo * bytes, scratch + lo * hd, (hi - lo) * hd);
      break;
    }
  }
  return scratch;
}

void write_kv(paged_kv_cache& cache, std::int64_t layer, std::span<const attention_row> rows,
              const float* k, const float* v) {
  const std::int32_t bs = cache.block_size();
  const std::int64_t nkv = cache.num_kv_heads(), hd = cache.head_dim();
  for (std::size_t t = 0; t < rows.size(); ++t) {
    const auto& r = rows[t];
    TROUPE_CHECK(r.position >= 0, "negative position");
    const auto bi = static_cast<std::size_t>(r.position / bs);
    TROUPE_CHECK(bi < r.block_table.size(), "block table too short for position");
    const block_id b = r.block_table[bi];
    TROUPE_CHECK(b >= 0 && b < cache.num_blocks(), "block id out of range");
    for (std::int64_t h = 0; h < nkv; ++h) {
      const std::int64_t src = (static_cast<std::int64_t>(t) * nkv + h) * hd;
      cache.write(layer, b, h, r.position % bs, k + src, v + src);
    }
  }
}

namespace {

using v16 = float __attribute__((vector_size(64), aligned(4)));

auto load16(const float* p) -> v16 { return *reinterpret_cast<const v16*>(p); }
void store16(float* p, v16 v) { *reinterpret_cast<v16*>(p) = v; }

// sg[j - lo] = scale · q · K[:, j] for slots [lo, m) of one block (K is
// [head_dim, bs]). Sixteen slots at a time in one register: accumulating in
// memory would chain every step through a store and a load.
void block_scores(const float* q, const float* kb, std::int64_t head_dim, std::int32_t bs,
                  std::int32_t lo, std::int32_t m, float scale, float* sg) {
  std::int32_t j = lo;
  for (; j < m && j + 16 <= bs; j += 16) { // a block row holds bs slots: reading 16 stays inside
    // Four independent chains: one would wait out the FMA latency each step.
    v16 a0{}, a1{}, a2{}, a3{};
    std::int64_t i = 0;
    for (; i + 4 <= head_dim; i += 4) {
      a0 += q[i] * load16(kb + i * bs + j);
      a1 += q[i + 1] * load16(kb + (i + 1) * bs + j);
      a2 += q[i + 2] * load16(kb + (i + 2) * bs + j);
      a3 += q[i + 3] * load16(kb + (i + 3) * bs + j);
    }
    for (; i < head_dim; ++i) a0 += q[i] * load16(kb + i * bs + j);
    const v16 acc = ((a0 + a1) + (a2 + a3)) * scale;
    if (j + 16 <= m) {
      store16(sg + j - lo, acc);
    } else {
      for (std::int32_t l = 0; l < m - j; ++l) sg[j - lo + l] = acc[l];
    }
  }
  for (; j < m; ++j) {
    float s = 0.0f;
    for (std::int64_t i = 0; i < head_dim; ++i) s += q[i] * kb[i * bs + j];
    sg[j - lo] = s * scale;
  }
}

// out += Σ_j p[j] · V[j, :] over the first m slots of one block (V is
// [bs, head_dim]), the output columns held in registers 64 at a time.
void block_values(const float* p, const float* vb, std::int32_t m, std::int64_t head_dim,
                  float* out) {
  std::int64_t c = 0;
  for (; c + 64 <= head_dim; c += 64) {
    v16 a0 = load16(out + c), a1 = load16(out + c + 16), a2 = load16(out + c + 32),
        a3 = load16(out + c + 48);
    for (std::int32_t j = 0; j < m; ++j) {
      const float* vj = vb + j * head_dim + c;
      a0 += p[j] * load16(vj);
      a1 += p[j] * load16(vj + 16);
      a2 += p[j] * load16(vj + 32);
      a3 += p[j] * load16(vj + 48);
    }
    store16(out + c, a0);
    store16(out + c + 16, a1);
    store16(out + c + 32, a2);
    store16(out + c + 48, a3);
  }
  for (; c + 16 <= head_dim; c += 16) {
    v16 a = load16(out + c);
    for (std::int32_t j = 0; j < m; ++j) a += p[j] * load16(vb + j * head_dim + c);
    store16(out + c, a);
  }
  for (; c < head_dim; ++c)
    for (std::int32_t j = 0; j < m; ++j) out[c] += p[j] * vb[j * head_dim + c];
}

} // namespace

void paged_attention(paged_kv_cache& cache, std::int64_t layer,
                     std::span<const attention_row> rows, const float* q, std::int64_t num_heads,
                     std::int64_t num_kv_heads, std::int64_t head_dim, float* out,
                     const attention_options& options) {
  const std::int64_t num_rows = static_cast<std::int64_t>(rows.size());
  const std::int64_t group = num_heads / num_kv_heads;
  const std::int32_t bs = cache.block_size();
  const float scale = options.scale > 0 ? options.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float cap = options.softcap;
  const std::int32_t window = options.window;
  // One work item: a token and a kv head, with the `group` query heads that
  // share it, so each key and value is read once per group.
#pragma omp parallel
  {
    thread_local std::vector<float> scores; // kept across calls: no allocation per layer
    thread_local std::vector<float> tile;   // a block's keys or values widened to F32
    tile.resize(static_cast<std::size_t>(head_dim * bs));
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (std::int64_t t = 0; t < num_rows; ++t)
      for (std::int64_t kvh = 0; kvh < num_kv_heads; ++kvh) {
        const auto& r = rows[static_cast<std::size_t>(t)];
        const std::int32_t end = r.position + 1;
        // Positions [first, end); scores[g * n + j - first].
        const std::int32_t first = window > 0 ? std::max(0, end - window) : 0;
        const std::int32_t n = end - first;
        const std::int64_t h0 = kvh * group;
        scores.resize(static_cast<std::size_t>(n * group));
        for (std::int32_t j0 = first / bs * bs; j0 < end; j0 += bs) {
          const std::int32_t lo = std::max(first, j0) - j0;
          const std::int32_t m = std::min(bs, end - j0);
          const float* kb =
              cache.keys(layer, r.block_table[static_cast<std::size_t>(j0 / bs)], kvh, tile.data(), lo, m);
          for (std::int64_t g = 0; g < group; ++g)
            block_scores(q + (t * num_heads + h0 + g) * head_dim, kb, head_dim, bs, lo, m, scale,
                         scores.data() + g * n + (j0 + lo - first));
        }
        for (std::int64_t g = 0; g < group; ++g) {
          float* sg = scores.data() + g * n;
          if (cap > 0)
            for (std::int32_t j = 0; j < n; ++j) sg[j] = cap * std::tanh(sg[j] / cap);
          const float* sink = options.sinks != nullptr ? options.sinks + h0 + g : nullptr;
          const float mx = std::max(*std::max_element(sg, sg + n), sink != nullptr ? *sink : -INFINITY);
          float sum = 0.0f;
          for (std::int32_t j = 0; j < n; ++j) sum += sg[j] = fast_exp(sg[j] - mx);
          if (sink != nullptr) sum += fast_exp(*sink - mx);
          const float inv = 1.0f / sum;
          for (std::int32_t j = 0; j < n; ++j) sg[j] *= inv;
          std::memset(out + (t * num_heads + h0 + g) * head_dim, 0,
                      static_cast<std::size_t>(head_dim) * sizeof(float));
        }
        for (std::int32_t j0 = first / bs * bs; j0 < end; j0 += bs) {
          const std::int32_t lo = std::max(first, j0) - j0;
          const std::int32_t m = std::min(bs, end - j0);
          const float* vb =
              cache.values(layer, r.block_table[static_cast<std::size_t>(j0 / bs)], kvh, tile.data(), lo, m);
          for (std::int64_t g = 0; g < group; ++g)
            block_values(scores.data() + g * n + (j0 + lo - first), vb + static_cast<std::int64_t>(lo) * head_dim,
                         m - lo, head_dim, out + (t * num_heads + h0 + g) * head_dim);
        }
      }
  }
}

} // namespace troupe
