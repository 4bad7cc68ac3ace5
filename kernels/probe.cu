// Measurement kernels; launchers in probe.hpp.

#include "kernels/common.cuh"
#include "kernels/probe.hpp"

namespace troupe::kernels {
namespace {

__global__ void read_probe_kernel(const uint4* __restrict__ data, std::int64_t n, float* sink) {
  __shared__ float scratch[32];
  float acc = 0.0f;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  // Four independent loads in flight per thread.
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = data[i], b = data[i + stride], c = data[i + 2 * stride], d = data[i + 3 * stride];
    acc += __uint_as_float(a.x ^ b.y ^ c.z ^ d.w);
  }
  for (; i < n; i += stride) acc += __uint_as_float(data[i].x);
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

__global__ void fill_kernel(__nv_bfloat16* data, std::int64_t n, std::uint64_t seed, float scale) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f); // [0, 1)
    data[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * scale);
  }
}

} // namespace

auto read_probe_grid(int num_sms) -> int { return 4 * num_sms; }

void read_probe(const void* data, std::int64_t bytes, float* sink, cudaStream_t stream) {
  int dev = 0, sms = 1;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  read_probe_kernel<<<read_probe_grid(sms), 512, 0, stream>>>(static_cast<const uint4*>(data), bytes / 16, sink);
}

void fill_random_bf16(void* data, std::int64_t n, std::uint64_t seed, float scale, cudaStream_t stream) {
  fill_kernel<<<4096, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data), n, seed, scale);
}

} // namespace troupe::kernels
