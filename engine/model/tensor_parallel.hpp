#pragma once
// Tensor parallelism for a decoder of any supported family (Megatron-style), one
// sharding for every backend: the CPU backend runs it in-process (tests with
// 2 and 4 ranks), the CUDA backend over NCCL.
//
// Rank r of W holds query heads [r·H/W, (r+1)·H/W) and key/value heads
// [r·K/W, (r+1)·K/W) (a query head's key/value head stays on its rank), the
// matching columns of o_proj, rows [r·I/W, (r+1)·I/W) of gate_proj and
// up_proj, and the matching columns of down_proj; Qwen2's q/k/v biases
// follow their rows (Phi-3's fused projections are already row views); each
// expert of a mixture is split as the dense MLP is, its router replicated.
// Embedding, norms (per-head q/k norms too) and the head are replicated. After o_proj and after down_proj each rank holds a
// partial sum of the hidden state; an all-reduce completes it.

#include "engine/model/model_weights.hpp"

#include <cstdint>

namespace troupe {

struct tp_rank {
  int rank = 0;
  int world = 1;
};

/// Sums a buffer over the ranks of a group, in place, every rank ending
/// with the same values (so that the replicated parts stay identical).
class all_reduce {
public:
  virtual ~all_reduce() = default;
  /// Called by every rank with its own buffer of the same n floats.
  virtual void sum(float* data, std::int64_t n) = 0;
};

/// Throws model_error unless heads, key/value heads and the intermediate
/// size all divide by world (1 <= world).
void check_shardable(const model_config& config, int world);

/// Rank `r`'s part of `full`: row slices are views into `full`'s tensors,
/// column slices (o_proj, down_proj) copies kept in the result's storage; the
/// config counts the rank's heads and intermediate size. `full` must outlive
/// the result.
auto shard_weights(const model_weights& full, tp_rank r) -> model_weights;

} // namespace troupe
