#pragma once
// What the CUDA backend's host code shares: errors as exceptions with one
// line naming the call, and device and pinned host memory freed with their
// owners. (Built into libtroupe_cuda.so and troupe-gpu-bench only.)

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace troupe::cuda {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}
inline void cublas_ok(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS: ") + what + ": status " + std::to_string(static_cast<int>(s)));
}
inline void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("NCCL: ") + what + ": " + ncclGetErrorString(r));
}

// Device memory, freed with its owner.
class device_memory {
public:
  device_memory() = default;
  explicit device_memory(std::size_t bytes) { cuda_ok(cudaMalloc(&p_, std::max<std::size_t>(bytes, 1)), "cudaMalloc"); }
  device_memory(device_memory&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  auto operator=(device_memory&& o) noexcept -> device_memory& {
    std::swap(p_, o.p_);
    return *this;
  }
  ~device_memory() {
    if (p_ != nullptr) cudaFree(p_);
  }
  auto get() const -> void* { return p_; }
  template <class T>
  auto as() const -> T* {
    return static_cast<T*>(p_);
  }

private:
  void* p_ = nullptr;
};

// Pinned host memory for the step's inputs and outputs (asynchronous copies).
class pinned_memory {
public:
  pinned_memory() = default;
  explicit pinned_memory(std::size_t bytes) { cuda_ok(cudaMallocHost(&p_, std::max<std::size_t>(bytes, 1)), "cudaMallocHost"); }
  pinned_memory(pinned_memory&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  auto operator=(pinned_memory&& o) noexcept -> pinned_memory& {
    std::swap(p_, o.p_);
    return *this;
  }
  ~pinned_memory() {
    if (p_ != nullptr) cudaFreeHost(p_);
  }
  template <class T>
  auto as() const -> T* {
    return static_cast<T*>(p_);
  }

private:
  void* p_ = nullptr;
};

} // namespace troupe::cuda
