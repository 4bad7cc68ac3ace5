#pragma once
// What the GPU tests share: a main() that skips (exit 77, which meson reports
// as SKIP) where no CUDA device can be used, device buffers that are
// poisoned before each run, and host-side conversions.

#include "base/dtype.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace troupe::gpu_test {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// After a launch: its own error, then what running it raised.
inline void check_launch(const char* what) {
  check_cuda(cudaGetLastError(), what);
  check_cuda(cudaDeviceSynchronize(), what);
}

/// A device buffer of n elements of `type`, filled with NaN (0xFF bytes)
/// until written.
class device_buffer {
public:
  device_buffer(dtype type, std::int64_t n) : type_(type), n_(n) {
    check_cuda(cudaMalloc(&p_, bytes() == 0 ? 1 : bytes()), "cudaMalloc");
    poison();
  }
  device_buffer(const device_buffer&) = delete;
  auto operator=(const device_buffer&) -> device_buffer& = delete;
  ~device_buffer() { cudaFree(p_); }

  void poison() { check_cuda(cudaMemset(p_, 0xFF, bytes()), "cudaMemset"); }
  auto get() const -> void* { return p_; }
  template <class T>
  auto as() const -> T* { return static_cast<T*>(p_); }
  auto bytes() const -> std::size_t { return static_cast<std::size_t>(n_) * dtype_size(type_); }

  /// Uploads floats, rounded to the buffer's type.
  void upload(const std::vector<float>& v) {
    std::vector<std::uint8_t> raw(bytes());
    for (std::int64_t i = 0; i < n_; ++i) {
      if (type_ == dtype::f32) {
        std::memcpy(raw.data() + 4 * i, &v[static_cast<std::size_t>(i)], 4);
      } else {
        const std::uint16_t h = type_ == dtype::bf16 ? f32_to_bf16(v[static_cast<std::size_t>(i)])
                                                     : f32_to_f16(v[static_cast<std::size_t>(i)]);
        std::memcpy(raw.data() + 2 * i, &h, 2);
      }
    }
    check_cuda(cudaMemcpy(p_, raw.data(), bytes(), cudaMemcpyHostToDevice), "upload");
  }
  /// The contents as floats.
  auto download() const -> std::vector<float> {
    std::vector<std::uint8_t> raw(bytes());
    check_cuda(cudaMemcpy(raw.data(), p_, bytes(), cudaMemcpyDeviceToHost), "download");
    std::vector<float> v(static_cast<std::size_t>(n_));
    for (std::int64_t i = 0; i < n_; ++i) {
      if (type_ == dtype::f32) {
        std::memcpy(&v[static_cast<std::size_t>(i)], raw.data() + 4 * i, 4);
      } else {
        std::uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        v[static_cast<std::size_t>(i)] = type_ == dtype::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
    }
    return v;
  }
  void upload_ints(const std::vector<std::int32_t>& v) {
    check_cuda(cudaMemcpy(p_, v.data(), v.size() * 4, cudaMemcpyHostToDevice), "upload");
  }
  auto download_ints() const -> std::vector<std::int32_t> {
    std::vector<std::int32_t> v(static_cast<std::size_t>(n_));
    check_cuda(cudaMemcpy(v.data(), p_, v.size() * 4, cudaMemcpyDeviceToHost), "download");
    return v;
  }

private:
  dtype type_;
  std::int64_t n_;
  void* p_ = nullptr;
};

/// Values as the device holds them: rounded to `type`.
inline auto rounded(dtype type, std::vector<float> v) -> std::vector<float> {
  if (type == dtype::bf16)
    for (auto& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

/// ‖got − want‖ / ‖want‖; infinity when got holds a NaN.
inline auto relative_error(const std::vector<float>& got, const std::vector<double>& want) -> double {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != got[i]) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// The bound for outputs of the type: float32 arithmetic, or bf16 storage.
inline auto tolerance(dtype type) -> double { return type == dtype::bf16 ? 1e-2 : 1e-5; }

/// 0 when a device can be used, else prints why and returns 77.
inline auto device_or_skip() -> int {
  int n = 0;
  if (const auto e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0) {
    std::printf("skipped: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 77;
  }
  return 0;
}

} // namespace troupe::gpu_test
