#pragma once
// The executor seam (like LevelDB's Env): the scheduler hands it one step and
// gets the sampled tokens back. The server plugs in the CPU or CUDA backend,
// the simulator a cost model.

#include "engine/core/scheduler_output.hpp"

#include <cstdint>

namespace troupe {

class executor {
public:
  virtual ~executor() = default;

  /// Runs one step: copies the blocks it swaps out, then in (host swap
  /// space, where the backend has any), registers new requests, computes every scheduled chunk
  /// (writing its keys and values into the blocks of its table), samples
  /// where asked, then forgets the finished requests.
  virtual auto execute(const scheduler_output& step) -> step_result = 0;

  /// Tokens per KV block.
  virtual auto block_size() const -> std::int32_t = 0;

  /// The model's vocabulary size: token ids are [0, vocab_size). Sampled ids
  /// may be fewer: the backends' num_sampled_ids (the tokenizer's pieces).
  virtual auto vocab_size() const -> std::int64_t = 0;

  /// Blocks the KV cache holds; block ids are [0, num_kv_blocks).
  virtual auto num_kv_blocks() const -> std::int32_t = 0;
};

} // namespace troupe
