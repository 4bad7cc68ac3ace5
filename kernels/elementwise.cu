// Element- and row-wise kernels of the Llama decoder; launchers in elementwise.hpp.

#include "kernels/common.cuh"
#include "kernels/elementwise.hpp"

#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

namespace troupe::kernels {
namespace {

constexpr int k_threads = 256;

auto blocks_for(std::int64_t n, int threads = k_threads) -> unsigned {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

template <class T>
__global__ void embedding_kernel(const T* __restrict__ table, const std::int32_t* __restrict__ ids, std::int64_t dim,
                                 T* __restrict__ out) {
  const std::int64_t t = blockIdx.x;
  const T* src = table + static_cast<std::int64_t>(ids[t]) * dim;
  for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[t * dim + i] = src[i];
}

template <class T>
__global__ void rms_norm_kernel(T* __restrict__ residual, const T* __restrict__ add, const float* __restrict__ weight,
                                T* __restrict__ out, std::int64_t dim, float eps) {
  __shared__ float scratch[32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float x = to_float(residual[base + i]);
    if (add != nullptr) {
      x += to_float(add[base + i]);
      residual[base + i] = from_float<T>(x);
      x = to_float(residual[base + i]); // what the next layer reads, rounded alike
    }
    ss += x * x;
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(dim) + eps);
  for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[base + i] = from_float<T>(to_float(residual[base + i]) * inv * weight[i]);
}

template <class T>
__global__ void rope_kernel(T* __restrict__ qkv, std::int64_t row_stride, const std::int32_t* __restrict__ positions,
                            const float* __restrict__ cos, const float* __restrict__ sin, std::int64_t heads,
                            std::int64_t head_dim) {
  const std::int64_t t = blockIdx.x, half = head_dim / 2;
  const float* c = cos + static_cast<std::int64_t>(positions[t]) * half;
  const float* s = sin + static_cast<std::int64_t>(positions[t]) * half;
  T* row = qkv + t * row_stride;
  for (std::int64_t j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const std::int64_t h = j / half, i = j % half;
    T* v = row + h * head_dim;
    const float a = to_float(v[i]), b = to_float(v[i + half]);
    v[i] = from_float<T>(a * c[i] - b * s[i]);
    v[i + half] = from_float<T>(b * c[i] + a * s[i]);
  }
}

template <class T>
__global__ void swiglu_kernel(const T* __restrict__ gate_up, T* __restrict__ out, std::int64_t rows,
                              std::int64_t inter) {
  const std::int64_t n = rows * inter;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = k / inter, i = k % inter;
    const float g = to_float(gate_up[t * 2 * inter + i]), u = to_float(gate_up[t * 2 * inter + inter + i]);
    out[k] = from_float<T>(g / (1.0f + __expf(-g)) * u);
  }
}

template <class T>
__global__ void kv_append_kernel(kv_append_params p) {
  const std::int64_t t = blockIdx.x;
  const std::int32_t slot = p.slots[t];
  if (slot < 0) return;
  const std::int64_t block = slot / p.block_size, offset = slot % p.block_size;
  const T* row = static_cast<const T*>(p.qkv) + t * p.row_stride;
  T* kc = static_cast<T*>(p.k_cache);
  T* vc = static_cast<T*>(p.v_cache);
  for (std::int64_t j = threadIdx.x; j < p.num_kv_heads * p.head_dim; j += blockDim.x) {
    const std::int64_t h = j / p.head_dim, d = j % p.head_dim;
    const std::int64_t at = ((block * p.num_kv_heads + h) * p.block_size + offset) * p.head_dim + d;
    kc[at] = row[p.k_offset + j];
    vc[at] = row[p.v_offset + j];
  }
}

template <class From, class To>
__global__ void convert_kernel(const From* __restrict__ src, To* __restrict__ dst, std::int64_t n) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<From, __half>)
      dst[k] = from_float<To>(__half2float(src[k]));
    else
      dst[k] = from_float<To>(to_float(src[k]));
  }
}


auto grid_for(std::int64_t n) -> unsigned {
  return static_cast<unsigned>(std::min<std::int64_t>(blocks_for(n), 65535));
}

} // namespace

void embedding(dtype act, const embedding_params& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  dispatch(act, [&]<class T>(T*) {
    embedding_kernel<T><<<static_cast<unsigned>(p.rows), k_threads, 0, stream>>>(
        static_cast<const T*>(p.table), p.ids, p.dim, static_cast<T*>(p.out));
  });
}

void rms_norm(dtype act, const rms_norm_params& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  dispatch(act, [&]<class T>(T*) {
    rms_norm_kernel<T><<<static_cast<unsigned>(p.rows), 512, 0, stream>>>(
        static_cast<T*>(p.residual), static_cast<const T*>(p.add), p.weight, static_cast<T*>(p.out), p.dim, p.eps);
  });
}

void rope(dtype act, const rope_params& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  dispatch(act, [&]<class T>(T*) {
    // q and k heads are adjacent in the row: one pass over both.
    rope_kernel<T><<<static_cast<unsigned>(p.rows), k_threads, 0, stream>>>(
        static_cast<T*>(p.qkv), p.row_stride, p.positions, p.cos, p.sin, p.num_q_heads + p.num_kv_heads,
        p.head_dim);
  });
}

void swiglu(dtype act, const swiglu_params& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  dispatch(act, [&]<class T>(T*) {
    swiglu_kernel<T><<<grid_for(p.rows * p.inter), k_threads, 0, stream>>>(
        static_cast<const T*>(p.gate_up), static_cast<T*>(p.out), p.rows, p.inter);
  });
}

void kv_append(dtype act, const kv_append_params& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  dispatch(act, [&]<class T>(T*) { kv_append_kernel<T><<<static_cast<unsigned>(p.rows), 128, 0, stream>>>(p); });
}

void convert(dtype from, const void* src, dtype to, void* dst, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch(to, [&]<class To>(To*) {
    const auto grid = grid_for(n);
    auto* d = static_cast<To*>(dst);
    if (from == dtype::f32)
      convert_kernel<float, To><<<grid, k_threads, 0, stream>>>(static_cast<const float*>(src), d, n);
    else if (from == dtype::f16)
      convert_kernel<__half, To><<<grid, k_threads, 0, stream>>>(static_cast<const __half*>(src), d, n);
    else
      convert_kernel<__nv_bfloat16, To><<<grid, k_threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), d, n);
  });
}

} // namespace troupe::kernels
