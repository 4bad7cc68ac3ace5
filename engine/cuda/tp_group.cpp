// The CUDA backend's entry points: a tensor-parallel group of one-device
// executors (cuda_executor.cpp), make_cuda_executor, and the C symbols the
// server finds with dlsym.

#include "engine/cuda/cuda_executor.hpp"

#include "engine/cuda/cuda_memory.hpp"

#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace troupe::cuda {
namespace {

// A tensor-parallel group behind the executor seam.
class tp_group final : public executor {
public:
  tp_group(const model_weights& weights, const cuda_executor_options& options) {
    const auto world = static_cast<int>(options.devices.size());
    ncclUniqueId id{};
    nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    ranks_.resize(options.devices.size());
    std::vector<std::string> errors(options.devices.size());
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      threads.emplace_back([&, r] {
        try {
          auto o = options;
          o.device = options.devices[static_cast<std::size_t>(r)];
          o.devices.clear();
          o.tp_rank = r;
          o.tp_world = world;
          o.nccl_id.assign(reinterpret_cast<const char*>(&id), sizeof id);
          ranks_[static_cast<std::size_t>(r)] = make_device_executor(weights, o);
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(r)] = "rank " + std::to_string(r) + " (cuda:" +
                                                std::to_string(options.devices[static_cast<std::size_t>(r)]) + "): " + e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (!e.empty()) throw std::runtime_error(e);
  }

  auto execute(const scheduler_output& step) -> step_result override {
    std::vector<step_result> results(ranks_.size());
    std::vector<std::string> errors(ranks_.size());
    std::vector<std::thread> others;
    const auto run = [&](std::size_t r) {
      try {
        results[r] = ranks_[r]->execute(step);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    };
    for (std::size_t r = 1; r < ranks_.size(); ++r) others.emplace_back(run, r);
    run(0);
    for (auto& t : others) t.join();
    for (const auto& e : errors)
      if (!e.empty()) throw std::runtime_error(e);
    return std::move(results[0]);
  }
  auto block_size() const -> std::int32_t override { return ranks_[0]->block_size(); }
  auto vocab_size() const -> std::int64_t override { return ranks_[0]->vocab_size(); }
  auto num_kv_blocks() const -> std::int32_t override {
    std::int32_t n = ranks_[0]->num_kv_blocks(); // the ranks' pools may differ in size: the smallest
    for (const auto& r : ranks_) n = std::min(n, r->num_kv_blocks());
    return n;
  }

private:
  std::vector<std::unique_ptr<executor>> ranks_;
};

} // namespace

auto make_cuda_executor(const model_weights& weights, const cuda_executor_options& options)
    -> std::unique_ptr<executor> {
  if (options.devices.size() > 1) return std::make_unique<tp_group>(weights, options);
  auto o = options;
  if (o.devices.size() == 1) o.device = o.devices.front();
  return make_device_executor(weights, o);
}

} // namespace troupe::cuda

// The entry point the server finds with dlsym (engine/cuda/cuda_backend.cpp).
extern "C" {
auto troupe_cuda_abi_version() -> int { return 2; }
auto troupe_cuda_make_executor(const troupe::model_weights* weights, const troupe::cuda::cuda_executor_options* options,
                               char* error, std::size_t error_size) -> troupe::executor* {
  try {
    return troupe::cuda::make_cuda_executor(*weights, *options).release();
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}
}
