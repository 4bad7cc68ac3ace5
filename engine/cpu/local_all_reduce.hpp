#pragma once
// An all-reduce among threads of one process: the CPU backend's stand-in for
// NCCL, so that the tensor-parallel sharding runs (and is tested) with 2 or 4
// ranks on a machine with no GPU.

#include "engine/model/tensor_parallel.hpp"

#include <barrier>
#include <cstdint>
#include <memory>
#include <vector>

namespace troupe {

class local_all_reduce_group {
public:
  explicit local_all_reduce_group(int world);

  /// Rank r's end of the group, to be used by one thread only. Every rank
  /// calls sum() the same number of times with buffers of the same size.
  auto member(int rank) -> all_reduce&;

private:
  class member_impl final : public all_reduce {
  public:
    member_impl(local_all_reduce_group& g, int rank) : group_(g), rank_(rank) {}
    void sum(float* data, std::int64_t n) override { group_.sum(rank_, data, n); }

  private:
    local_all_reduce_group& group_;
    int rank_;
  };

  void sum(int rank, float* data, std::int64_t n);

  std::barrier<> barrier_;
  std::vector<float*> buffers_;
  std::vector<float> total_;
  std::vector<std::unique_ptr<member_impl>> members_;
};

} // namespace troupe
