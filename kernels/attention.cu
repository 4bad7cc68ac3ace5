// Attention over the paged KV cache: decode (GQA-aware, split-K) and chunked
// prefill (flash-attention-style tiles). Launchers in attention.hpp.

#include "kernels/attention.hpp"
#include "kernels/common.cuh"

#include <algorithm>

namespace troupe::kernels {
namespace {

constexpr int k_decode_threads = 128;
constexpr int k_decode_tile = 64; // tokens scored at once

// One CTA: one sequence, one kv head, one range of its context. Every query
// head of the kv head is scored against each key as it is read.
template <class T>
__global__ void decode_kernel(decode_attention_params p) {
  extern __shared__ float smem[];
  const int seq = blockIdx.y, kv_head = blockIdx.x, split = blockIdx.z;
  const int ctx = p.context_lens[seq];
  const int group = static_cast<int>(p.num_q_heads / p.num_kv_heads);
  const int hd = static_cast<int>(p.head_dim), bs = static_cast<int>(p.block_size);
  // The split's range, whole blocks.
  const int blocks = (ctx + bs - 1) / bs;
  const int per_split = (blocks + p.num_splits - 1) / p.num_splits;
  const int first = min(ctx, split * per_split * bs), last = min(ctx, (split + 1) * per_split * bs);

  float* qs = smem;                       // [group][hd], scaled
  float* acc = qs + group * hd;           // [group][hd]
  float* s = acc + group * hd;            // [group][tile]
  float* m = s + group * k_decode_tile;   // [group]
  float* l = m + group;                   // [group]
  float* corr = l + group;                // [group]

  const T* q = static_cast<const T*>(p.q) + static_cast<std::int64_t>(p.q_rows[seq]) * p.q_stride +
               static_cast<std::int64_t>(kv_head) * group * hd;
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
    qs[i] = to_float(q[i]) * p.scale;
    acc[i] = 0.0f;
  }
  for (int g = threadIdx.x; g < group; g += blockDim.x) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  __syncthreads();

  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  const std::int32_t* table = p.block_tables + static_cast<std::int64_t>(seq) * p.max_blocks;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // Where token j's key (or value) row lies.
  const auto row_of = [&](int j) -> std::int64_t {
    const std::int64_t b = table[j / bs];
    return ((b * p.num_kv_heads + kv_head) * bs + j % bs) * hd;
  };

  for (int t0 = first; t0 < last; t0 += k_decode_tile) {
    const int n = min(k_decode_tile, last - t0);
    // Scores: a warp per key, its lanes across head_dim, every query head at once.
    for (int j = warp; j < n; j += warps) {
      const T* k = kc + row_of(t0 + j);
      for (int g = 0; g < group; ++g) {
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += qs[g * hd + d] * to_float(k[d]);
        dot = warp_sum(dot);
        if (lane == 0) s[g * k_decode_tile + j] = dot;
      }
    }
    __syncthreads();
    // Online softmax: a warp per query head.
    for (int g = warp; g < group; g += warps) {
      float mx = -INFINITY;
      for (int j = lane; j < n; j += 32) mx = fmaxf(mx, s[g * k_decode_tile + j]);
      mx = warp_max(mx);
      const float m_new = fmaxf(m[g], mx);
      float sum = 0.0f;
      for (int j = lane; j < n; j += 32) {
        const float e = __expf(s[g * k_decode_tile + j] - m_new);
        s[g * k_decode_tile + j] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const float c = __expf(m[g] - m_new); // 0 on the first tile (m = -inf)
        corr[g] = c;
        l[g] = l[g] * c + sum;
        m[g] = m_new;
      }
    }
    __syncthreads();
    // Values: a thread per (query head, dimension).
    for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
      const int g = i / hd, d = i % hd;
      float a = acc[i] * corr[g];
      for (int j = 0; j < n; ++j) a += s[g * k_decode_tile + j] * to_float(vc[row_of(t0 + j) + d]);
      acc[i] = a;
    }
    __syncthreads();
  }

  const int head0 = kv_head * group;
  if (p.num_splits == 1) {
    if (ctx == 0) return;
    T* out = static_cast<T*>(p.out) + static_cast<std::int64_t>(p.q_rows[seq]) * p.num_q_heads * hd;
    for (int i = threadIdx.x; i < group * hd; i += blockDim.x)
      out[head0 * hd + i] = from_float<T>(acc[i] / l[i / hd]);
    return;
  }
  // Partials: [seq][split][head][hd] sums, then [seq][split][head] maxima and totals.
  const std::int64_t base = (static_cast<std::int64_t>(seq) * p.num_splits + split) * p.num_q_heads;
  float* wacc = p.workspace;
  float* wm = wacc + p.num_seqs * p.num_splits * p.num_q_heads * hd;
  float* wl = wm + p.num_seqs * p.num_splits * p.num_q_heads;
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) wacc[(base + head0) * hd + i] = acc[i];
  for (int g = threadIdx.x; g < group; g += blockDim.x) {
    wm[base + head0 + g] = m[g]; // -inf for an empty range
    wl[base + head0 + g] = l[g];
  }
}

// Merges the splits of one (sequence, query head).
template <class T>
__global__ void decode_merge_kernel(decode_attention_params p) {
  const int seq = blockIdx.y, head = blockIdx.x;
  if (p.context_lens[seq] == 0) return;
  const int hd = static_cast<int>(p.head_dim);
  const float* wacc = p.workspace;
  const float* wm = wacc + p.num_seqs * p.num_splits * p.num_q_heads * hd;
  const float* wl = wm + p.num_seqs * p.num_splits * p.num_q_heads;
  const auto at = [&](int split) { return (static_cast<std::int64_t>(seq) * p.num_splits + split) * p.num_q_heads + head; };
  float mx = -INFINITY;
  for (int k = 0; k < p.num_splits; ++k) mx = fmaxf(mx, wm[at(k)]);
  float total = 0.0f;
  for (int k = 0; k < p.num_splits; ++k)
    if (wm[at(k)] > -INFINITY) total += wl[at(k)] * __expf(wm[at(k)] - mx);
  T* out = static_cast<T*>(p.out) + static_cast<std::int64_t>(p.q_rows[seq]) * p.num_q_heads * hd +
           static_cast<std::int64_t>(head) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0.0f;
    for (int k = 0; k < p.num_splits; ++k)
      if (wm[at(k)] > -INFINITY) a += wacc[at(k) * hd + d] * __expf(wm[at(k)] - mx);
    out[d] = from_float<T>(a / total);
  }
}

constexpr int k_prefill_threads = 128;
constexpr int k_kv_tile = 16; // keys per tile

// One CTA: up to prefill_tile_rows query rows of one sequence, one query head.
template <class T>
__global__ void prefill_kernel(prefill_attention_params p) {
  extern __shared__ float smem[];
  constexpr int R = prefill_tile_rows;
  const int tile = blockIdx.x, head = blockIdx.y;
  const int row0 = p.tile_first_row[tile], rows = p.tile_num_rows[tile];
  const int hd = static_cast<int>(p.head_dim), bs = static_cast<int>(p.block_size);
  const int kv_head = head / static_cast<int>(p.num_q_heads / p.num_kv_heads);
  const int seq = p.row_seq[row0];

  float* qs = smem;              // [R][hd]
  float* ks = qs + R * hd;       // [kv_tile][hd]
  float* vs = ks + k_kv_tile * hd; // [kv_tile][hd]
  float* acc = vs + k_kv_tile * hd; // [R][hd]
  float* s = acc + R * hd;       // [R][kv_tile]
  float* m = s + R * k_kv_tile;  // [R]
  float* l = m + R;              // [R]
  float* corr = l + R;           // [R]
  int* pos = reinterpret_cast<int*>(corr + R); // [R]

  const T* q = static_cast<const T*>(p.q);
  for (int i = threadIdx.x; i < R * hd; i += blockDim.x) {
    const int r = i / hd, d = i % hd;
    qs[i] = r < rows ? to_float(q[static_cast<std::int64_t>(row0 + r) * p.q_stride + static_cast<std::int64_t>(head) * hd + d]) * p.scale : 0.0f;
    acc[i] = 0.0f;
  }
  for (int r = threadIdx.x; r < R; r += blockDim.x) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    pos[r] = r < rows ? p.positions[row0 + r] : -1;
  }
  __syncthreads();
  int last = 0; // keys [0, last] are needed by some row
  for (int r = 0; r < rows; ++r) last = max(last, pos[r]);

  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  const std::int32_t* table = p.block_tables + static_cast<std::int64_t>(seq) * p.max_blocks;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;

  for (int t0 = 0; t0 <= last; t0 += k_kv_tile) {
    const int n = min(k_kv_tile, last + 1 - t0);
    for (int i = threadIdx.x; i < n * hd; i += blockDim.x) {
      const int j = i / hd, d = i % hd, t = t0 + j;
      const std::int64_t at = ((static_cast<std::int64_t>(table[t / bs]) * p.num_kv_heads + kv_head) * bs + t % bs) * hd + d;
      ks[i] = to_float(kc[at]);
      vs[i] = to_float(vc[at]);
    }
    __syncthreads();
    // Scores, causal: a thread per (row, key).
    for (int i = threadIdx.x; i < R * k_kv_tile; i += blockDim.x) {
      const int r = i / k_kv_tile, j = i % k_kv_tile;
      float dot = -INFINITY;
      if (r < rows && j < n && t0 + j <= pos[r]) {
        dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot += qs[r * hd + d] * ks[j * hd + d];
      }
      s[i] = dot;
    }
    __syncthreads();
    // Online softmax: a warp per row (k_kv_tile <= 32: a lane per key).
    for (int r = warp; r < R; r += warps) {
      const float x = lane < k_kv_tile ? s[r * k_kv_tile + lane] : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(x));
      const float e = m_new == -INFINITY ? 0.0f : __expf(x - m_new);
      if (lane < k_kv_tile) s[r * k_kv_tile + lane] = e;
      const float sum = warp_sum(e);
      if (lane == 0) {
        const float c = m_new == -INFINITY ? 1.0f : __expf(m[r] - m_new);
        corr[r] = c;
        l[r] = l[r] * c + sum;
        m[r] = m_new;
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < R * hd; i += blockDim.x) {
      const int r = i / hd, d = i % hd;
      float a = acc[i] * corr[r];
      for (int j = 0; j < n; ++j) a += s[r * k_kv_tile + j] * vs[j * hd + d];
      acc[i] = a;
    }
    __syncthreads();
  }
  T* out = static_cast<T*>(p.out);
  for (int i = threadIdx.x; i < rows * hd; i += blockDim.x) {
    const int r = i / hd, d = i % hd;
    out[static_cast<std::int64_t>(row0 + r) * p.num_q_heads * hd + static_cast<std::int64_t>(head) * hd + d] =
        from_float<T>(acc[i] / l[r]);
  }
}

auto decode_smem_bytes(const decode_attention_params& p) -> std::size_t {
  const auto group = p.num_q_heads / p.num_kv_heads;
  return static_cast<std::size_t>(group * (2 * p.head_dim + k_decode_tile + 3)) * sizeof(float);
}

auto prefill_smem_bytes(const prefill_attention_params& p) -> std::size_t {
  constexpr int R = prefill_tile_rows;
  return static_cast<std::size_t>((2 * R + 2 * k_kv_tile) * p.head_dim + R * k_kv_tile + 4 * R) * sizeof(float);
}


} // namespace

auto decode_workspace_floats(const decode_attention_params& p) -> std::int64_t {
  return p.num_splits <= 1 ? 0 : p.num_seqs * p.num_splits * p.num_q_heads * (p.head_dim + 2);
}

void decode_attention(dtype act, const decode_attention_params& p, cudaStream_t stream) {
  if (p.num_seqs == 0) return;
  dispatch(act, [&]<class T>(T*) {
    const auto smem = decode_smem_bytes(p);
    cudaFuncSetAttribute(decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    const dim3 grid(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.num_seqs),
                    static_cast<unsigned>(std::max(1, p.num_splits)));
    decode_kernel<T><<<grid, k_decode_threads, smem, stream>>>(p);
    if (p.num_splits > 1)
      decode_merge_kernel<T><<<dim3(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.num_seqs)), 128, 0,
                               stream>>>(p);
  });
}

void prefill_attention(dtype act, const prefill_attention_params& p, cudaStream_t stream) {
  if (p.num_tiles == 0) return;
  dispatch(act, [&]<class T>(T*) {
    const auto smem = prefill_smem_bytes(p);
    cudaFuncSetAttribute(prefill_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    const dim3 grid(static_cast<unsigned>(p.num_tiles), static_cast<unsigned>(p.num_q_heads));
    prefill_kernel<T><<<grid, k_prefill_threads, smem, stream>>>(p);
  });
}

} // namespace troupe::kernels
