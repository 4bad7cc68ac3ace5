#pragma once
// Measurement kernels for the GPU benchmark (probe.cu).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace troupe::kernels {

/// Reads `bytes` (a multiple of 16) of device memory once with 16-byte loads
/// and writes one float per CTA into `sink` (grid_size() floats), so that the
/// reads cannot be elided: the device's read bandwidth, the ceiling a
/// memory-bound decode step is held to.
void read_probe(const void* data, std::int64_t bytes, float* sink, cudaStream_t stream);
auto read_probe_grid(int num_sms) -> int;

/// Fills n bf16 values with a hash of (seed, index) scaled to [-scale, scale]:
/// random weights made on the device, so that large models need no upload.
void fill_random_bf16(void* data, std::int64_t n, std::uint64_t seed, float scale, cudaStream_t stream);

} // namespace troupe::kernels
