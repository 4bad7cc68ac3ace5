#pragma once
// Device helpers every kernel shares: the two element types (F32 for the
// fp32 mode, BF16 otherwise; arithmetic always in F32) and block reductions.

#include "base/dtype.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace troupe::kernels {

template <class T>
__device__ __forceinline__ auto to_float(T x) -> float;
template <>
__device__ __forceinline__ auto to_float(float x) -> float { return x; }
template <>
__device__ __forceinline__ auto to_float(__nv_bfloat16 x) -> float { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ auto from_float(float x) -> T;
template <>
__device__ __forceinline__ auto from_float(float x) -> float { return x; }
template <>
__device__ __forceinline__ auto from_float(float x) -> __nv_bfloat16 { return __float2bfloat16_rn(x); }

__device__ __forceinline__ auto warp_sum(float v) -> float {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ auto warp_max(float v) -> float {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets the result. `scratch`: 32 floats of shared memory.
__device__ __forceinline__ auto block_sum(float v, float* scratch) -> float {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads(); // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ auto block_max(float v, float* scratch) -> float {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

/// Calls f with a null pointer of the element type `act` names (F32 or
/// BF16), so that a launcher picks its kernel's instantiation once.
template <class F>
void dispatch(dtype act, F&& f) {
  if (act == dtype::bf16)
    f(static_cast<__nv_bfloat16*>(nullptr));
  else
    f(static_cast<float*>(nullptr));
}

} // namespace troupe::kernels
