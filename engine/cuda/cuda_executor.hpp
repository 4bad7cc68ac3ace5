#pragma once
// The CUDA backend behind the executor seam: one executor per device owning
// the weights (converted to the activation type), the paged KV pool (sized
// from a fraction of device memory), its stream, cuBLAS and, with tensor
// parallelism, an NCCL communicator. Decode steps replay CUDA graphs
// captured per padded batch size; sampling runs on the device.
//
// Built into libtroupe_cuda.so only; the server reaches it through
// engine/cuda/cuda_backend.hpp (dlopen), so troupe never links libcudart.

#include "engine/executor.hpp"
#include "base/dtype.hpp"
#include "engine/model/model_weights.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace troupe::cuda {

struct cuda_executor_options {
  int device = 0;
  /// Tensor parallelism over these devices (one rank each, rank i on
  /// devices[i]), behind one executor; empty or one device: none.
  std::vector<int> devices;
  std::int32_t block_size = 16;
  /// Of the device memory free at start, the share for weights, activations
  /// and the KV pool (the rest stays for cuBLAS, NCCL and other processes).
  double memory_fraction = 0.9;
  std::int32_t num_kv_blocks = 0;   ///< 0: as many as memory_fraction leaves room for
  dtype act = dtype::bf16;          ///< bf16, or f32 (the fp32 mode)
  bool cuda_graphs = true;
  std::int32_t max_num_seqs = 256;  ///< largest decode batch captured as a graph
  std::int32_t max_num_batched_tokens = 8192;
  std::int32_t max_model_len = 4096;
  std::int32_t num_host_blocks = 0; ///< swap space in pinned host memory
  std::uint64_t seed = 0;           ///< draws the seeds of requests that bring none
  /// Ids the samplers may pick: [0, n), the tokenizer's vocabulary (a model
  /// pads its rows past it); 0 = the model's whole vocabulary. At most vocab_size.
  std::int64_t num_sampled_ids = 0;
  int tp_rank = 0, tp_world = 1;    ///< tensor parallelism: this rank of the group
  /// The group's NCCL unique id (ncclUniqueId's bytes) when tp_world > 1;
  /// with one rank the executor makes its own.
  std::string nccl_id;
  /// With one rank, still sum through NCCL (the tensor-parallel path, tested on one device).
  bool all_reduce_single_rank = false;
};

/// Creates the executor, or with several `devices` a tensor-parallel group:
/// its ranks, made at once on their own threads (NCCL's communicator needs
/// them all), each run its share of every step on its own thread; all
/// compute the same logits after the all-reduce and draw the same tokens
/// from the same seeds, and rank 0's result is returned. Throws
/// std::runtime_error naming what failed (no device, out of memory, a CUDA,
/// cuBLAS or NCCL error) in one line.
auto make_cuda_executor(const model_weights& weights, const cuda_executor_options& options)
    -> std::unique_ptr<executor>;

/// One device's executor (options.device; options.tp_rank of tp_world):
/// what make_cuda_executor runs, alone or as each rank of a group.
auto make_device_executor(const model_weights& weights, const cuda_executor_options& options)
    -> std::unique_ptr<executor>;

} // namespace troupe::cuda
