#include "engine/cuda/cuda_executor.hpp"

#include "base/check.hpp"
#include "engine/cpu/ops.hpp"
#include "engine/cuda/cuda_memory.hpp"
#include "engine/cuda/device_samplers.hpp"
#include "engine/cuda/step_plan.hpp"
#include "engine/model/tensor_parallel.hpp"
#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/sampling.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace troupe::cuda {
namespace {

struct device_layer {
  device_memory attn_norm, mlp_norm; // F32 [hidden]
  device_memory wqkv;                // [(heads + 2 kv_heads) * head_dim, hidden]
  device_memory wo;                  // [hidden, heads * head_dim]
  device_memory w_gate_up;           // [2 * inter, hidden]
  device_memory w_down;              // [hidden, inter]
  device_memory k_cache, v_cache;    // [blocks, kv_heads, block_size, head_dim]
};

// The fixed-address inputs a step (and a captured graph) reads.
// The fixed-address inputs a step (and a captured graph) reads, in one
// allocation; the tables last, so that a step copies only what it fills.
struct step_inputs {
  std::int32_t *tokens, *positions, *slots, *row_seq, *context_lens, *q_rows, *tile_first, *tile_rows, *sample_rows,
      *block_tables;
};

class cuda_executor final : public executor {
public:
  cuda_executor(const model_weights& weights, const cuda_executor_options& options);
  ~cuda_executor() override;

  auto execute(const scheduler_output& step) -> step_result override;
  auto block_size() const -> std::int32_t override { return o_.block_size; }
  auto vocab_size() const -> std::int64_t override { return c_.vocab_size; }
  auto num_kv_blocks() const -> std::int32_t override { return num_blocks_; }

private:
  auto upload(const weight_tensor& w, void* dst) -> void;
  auto upload_rows(std::initializer_list<const weight_tensor*> parts, std::size_t rows_total, std::int64_t cols)
      -> device_memory;
  void gemm(const void* x, std::int64_t rows, const void* w, std::int64_t n, std::int64_t k, void* y, bool f32_out);
  void forward(const step_plan& plan, std::int32_t rows, std::int32_t num_decode_rows, std::int32_t num_samples);
  auto decode_splits(std::int32_t seqs) const -> int;
  void swap(const scheduler_output& step);
  void all_reduce(void* data, std::int64_t n);
  void upload_inputs(std::int32_t decode_rows, std::int32_t head_rows);
  void run_forward(bool graphed, std::int32_t rows, std::int32_t decode_rows, std::int32_t head_rows);
  void upload_penalties();
  void copy_host_logits(std::int32_t samples);
  void launch_sampling(std::int32_t samples);
  void collect_samples(const scheduler_output& step, std::int32_t samples, step_result& out);

  cuda_executor_options o_;
  model_config c_;
  std::int64_t qkv_cols_ = 0;
  std::size_t elem_ = 2;
  int sms_ = 1;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  ncclComm_t comm_ = nullptr;
  device_memory blas_workspace_;

  device_memory embed_, lm_head_storage_, final_norm_, cos_, sin_;
  const void* lm_head_ = nullptr;
  std::vector<device_layer> layers_;
  std::int32_t num_blocks_ = 0;
  std::int32_t max_rows_ = 0, max_blocks_ = 0, max_splits_ = 1;

  // Activations, [max_rows_, *].
  device_memory x_, xn_, qkv_, att_, proj_, gate_up_, act_, last_, logits_, raw_, workspace_;
  device_memory in_;  // step_inputs' arrays, one allocation
  step_inputs dev_{};
  pinned_memory host_in_;
  std::size_t in_bytes_ = 0; ///< capacity of in_
  device_memory sample_params_, penalty_tokens_, penalty_counts_, out_tokens_, out_logprobs_;
  pinned_memory host_params_, host_penalty_tokens_, host_penalty_counts_, host_out_tokens_, host_out_logprobs_;
  std::int64_t penalty_capacity_ = 0;
  pinned_memory host_swap_;
  std::size_t block_bytes_ = 0; ///< one layer's keys (or values) of one block

  request_tables tables_;
  step_plan plan_;
  device_samplers samplers_;
  std::map<std::int32_t, cudaGraphExec_t> graphs_; ///< by padded decode batch size
  std::vector<float> host_logits_; ///< rows sampled on the host
};

cuda_executor::cuda_executor(const model_weights& weights, const cuda_executor_options& options)
  : o_(options), c_(weights.config), samplers_(options.seed) {
  if (o_.act != dtype::bf16 && o_.act != dtype::f32) throw std::runtime_error("the CUDA backend computes in bf16 or f32");
  check_shardable(weights.config, o_.tp_world);
  const model_weights shard = shard_weights(weights, {o_.tp_rank, o_.tp_world});
  c_ = shard.config;
  if (o_.num_sampled_ids < 0 || o_.num_sampled_ids > c_.vocab_size)
    throw std::runtime_error("num_sampled_ids " + std::to_string(o_.num_sampled_ids) + " is past the model's vocab_size " +
                             std::to_string(c_.vocab_size));
  if (o_.num_sampled_ids == 0) o_.num_sampled_ids = c_.vocab_size;
  elem_ = dtype_size(o_.act);
  cuda_ok(cudaSetDevice(o_.device), "cudaSetDevice");
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, o_.device), "cudaGetDeviceProperties");
  sms_ = prop.multiProcessorCount;
  cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  cublas_ok(cublasCreate(&blas_), "cublasCreate");
  cublas_ok(cublasSetStream(blas_, stream_), "cublasSetStream");
  // A workspace of our own, so that graph capture allocates nothing.
  blas_workspace_ = device_memory(32u << 20);
  cublas_ok(cublasSetWorkspace(blas_, blas_workspace_.get(), 32u << 20), "cublasSetWorkspace");
  if (o_.act == dtype::f32) cublas_ok(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode"); // no TF32
  if (o_.tp_world > 1 || o_.all_reduce_single_rank) {
    ncclUniqueId id{};
    if (o_.nccl_id.size() == sizeof id) std::memcpy(&id, o_.nccl_id.data(), sizeof id);
    else if (o_.tp_world == 1) nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    else throw std::runtime_error("tensor parallelism over " + std::to_string(o_.tp_world) + " ranks needs the group's NCCL id");
    nccl_ok(ncclCommInitRank(&comm_, o_.tp_world, id, o_.tp_rank), "ncclCommInitRank");
  }

  const std::int64_t d = c_.hidden_size, hd = c_.head_dim, nh = c_.num_attention_heads, nkv = c_.num_key_value_heads;
  const std::int64_t inter = c_.intermediate_size;
  qkv_cols_ = (nh + 2 * nkv) * hd;
  embed_ = device_memory(static_cast<std::size_t>(c_.vocab_size * d) * elem_);
  upload(shard.embed, embed_.get());
  if (shard.lm_head.data == shard.embed.data) {
    lm_head_ = embed_.get();
  } else {
    lm_head_storage_ = device_memory(static_cast<std::size_t>(c_.vocab_size * d) * elem_);
    upload(shard.lm_head, lm_head_storage_.get());
    lm_head_ = lm_head_storage_.get();
  }
  const auto upload_f32 = [&](const weight_tensor& w) {
    device_memory m(static_cast<std::size_t>(w.numel()) * 4);
    cuda_ok(cudaMemcpyAsync(m.get(), w.data, static_cast<std::size_t>(w.numel()) * 4, cudaMemcpyHostToDevice, stream_),
            "upload norm");
    return m;
  };
  final_norm_ = upload_f32(shard.final_norm);
  for (const auto& l : shard.layers) {
    device_layer dl;
    dl.attn_norm = upload_f32(l.attn_norm);
    dl.mlp_norm = upload_f32(l.mlp_norm);
    dl.wqkv = upload_rows({&l.wq, &l.wk, &l.wv}, static_cast<std::size_t>(qkv_cols_), d);
    dl.wo = upload_rows({&l.wo}, static_cast<std::size_t>(d), nh * hd);
    dl.w_gate_up = upload_rows({&l.w_gate, &l.w_up}, static_cast<std::size_t>(2 * inter), d);
    dl.w_down = upload_rows({&l.w_down}, static_cast<std::size_t>(d), inter);
    layers_.push_back(std::move(dl));
  }
  // RoPE tables for every position, as the CPU backend computes them.
  {
    const auto freq = rope_inv_freq(c_);
    std::vector<std::int32_t> pos(static_cast<std::size_t>(o_.max_model_len));
    std::iota(pos.begin(), pos.end(), 0);
    std::vector<float> cs, sn;
    rope_tables(freq, pos.data(), o_.max_model_len, cs, sn);
    cos_ = device_memory(cs.size() * 4);
    sin_ = device_memory(sn.size() * 4);
    cuda_ok(cudaMemcpyAsync(cos_.get(), cs.data(), cs.size() * 4, cudaMemcpyHostToDevice, stream_), "upload rope");
    cuda_ok(cudaMemcpyAsync(sin_.get(), sn.data(), sn.size() * 4, cudaMemcpyHostToDevice, stream_), "upload rope");
    cuda_ok(cudaStreamSynchronize(stream_), "upload rope"); // before cs and sn go
  }

  // Activations for the largest step: every batched token, or a padded decode batch.
  max_rows_ = std::max(o_.max_num_batched_tokens, o_.max_num_seqs);
  max_blocks_ = (o_.max_model_len + o_.block_size - 1) / o_.block_size;
  max_splits_ = 16;
  const auto rows = static_cast<std::size_t>(max_rows_);
  x_ = device_memory(rows * static_cast<std::size_t>(d) * elem_);
  xn_ = device_memory(rows * static_cast<std::size_t>(d) * elem_);
  qkv_ = device_memory(rows * static_cast<std::size_t>(qkv_cols_) * elem_);
  att_ = device_memory(rows * static_cast<std::size_t>(nh * hd) * elem_);
  proj_ = device_memory(rows * static_cast<std::size_t>(d) * elem_);
  gate_up_ = device_memory(rows * static_cast<std::size_t>(2 * inter) * elem_);
  act_ = device_memory(rows * static_cast<std::size_t>(inter) * elem_);
  const auto seqs = static_cast<std::size_t>(std::max(o_.max_num_seqs, 1));
  last_ = device_memory(seqs * static_cast<std::size_t>(d) * elem_);
  logits_ = device_memory(seqs * static_cast<std::size_t>(c_.vocab_size) * 4);
  raw_ = device_memory(seqs * static_cast<std::size_t>(c_.vocab_size) * 4);
  workspace_ = device_memory(seqs * static_cast<std::size_t>(max_splits_ * nh * (hd + 2)) * 4);
  // Inputs: 6 arrays of rows, the tables, 3 of sequences, 2 of tiles.
  const std::size_t table_ints = rows * static_cast<std::size_t>(max_blocks_);
  in_bytes_ = (6 * rows + table_ints + 3 * rows) * 4;
  in_ = device_memory(in_bytes_);
  host_in_ = pinned_memory(in_bytes_);
  {
    auto* p = in_.as<std::int32_t>();
    const auto take = [&](std::size_t n) { auto* q = p; p += n; return q; };
    dev_ = {take(rows), take(rows), take(rows), take(rows), take(rows), take(rows), take(rows), take(rows),
            take(rows), take(table_ints)};
  }
  sample_params_ = device_memory(seqs * sizeof(kernels::sampling_row));
  host_params_ = pinned_memory(seqs * sizeof(kernels::sampling_row));
  out_tokens_ = device_memory(seqs * 4);
  out_logprobs_ = device_memory(seqs * 4);
  host_out_tokens_ = pinned_memory(seqs * 4);
  host_out_logprobs_ = pinned_memory(seqs * 4);

  // The KV pool: what the memory fraction leaves.
  block_bytes_ = static_cast<std::size_t>(nkv * o_.block_size * hd) * elem_;
  const std::size_t per_block = 2 * block_bytes_ * layers_.size();
  if (o_.num_kv_blocks > 0) {
    num_blocks_ = o_.num_kv_blocks;
  } else {
    std::size_t free_bytes = 0, total = 0;
    cuda_ok(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    const double budget = o_.memory_fraction * static_cast<double>(total) - static_cast<double>(total - free_bytes);
    if (budget < static_cast<double>(per_block))
      throw std::runtime_error("the weights leave no device memory for the KV cache (memory_fraction " +
                               std::to_string(o_.memory_fraction) + ")");
    num_blocks_ = static_cast<std::int32_t>(std::min<double>(budget / static_cast<double>(per_block), 1 << 30));
  }
  for (auto& l : layers_) {
    l.k_cache = device_memory(static_cast<std::size_t>(num_blocks_) * block_bytes_);
    l.v_cache = device_memory(static_cast<std::size_t>(num_blocks_) * block_bytes_);
  }
  if (o_.num_host_blocks > 0) host_swap_ = pinned_memory(static_cast<std::size_t>(o_.num_host_blocks) * per_block);
  cuda_ok(cudaStreamSynchronize(stream_), "loading the weights");
}

cuda_executor::~cuda_executor() {
  for (auto& [n, g] : graphs_) cudaGraphExecDestroy(g);
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (blas_ != nullptr) cublasDestroy(blas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// One host tensor into device memory, converted to the activation type
// through a staging buffer.
auto cuda_executor::upload(const weight_tensor& w, void* dst) -> void {
  const auto bytes = w.num_bytes();
  device_memory staging(bytes);
  // On the stream, so that the conversion follows the copy (a plain cudaMemcpy
  // from pageable memory may return before its DMA ends, on another stream).
  cuda_ok(cudaMemcpyAsync(staging.get(), w.data, bytes, cudaMemcpyHostToDevice, stream_), "upload weights");
  kernels::convert(w.type, staging.get(), o_.act, dst, w.numel(), stream_);
  cuda_ok(cudaGetLastError(), "convert weights");
  cuda_ok(cudaStreamSynchronize(stream_), "convert weights");
}

// Row-major tensors of the same width stacked into one (fused q/k/v, gate/up).
auto cuda_executor::upload_rows(std::initializer_list<const weight_tensor*> parts, std::size_t rows_total,
                                std::int64_t cols) -> device_memory {
  device_memory m(rows_total * static_cast<std::size_t>(cols) * elem_);
  std::size_t at = 0;
  for (const auto* w : parts) {
    TROUPE_CHECK(w->cols == cols, "stacked weights differ in width");
    upload(*w, static_cast<std::byte*>(m.get()) + at * static_cast<std::size_t>(cols) * elem_);
    at += static_cast<std::size_t>(w->rows);
  }
  TROUPE_CHECK(at == rows_total, "stacked weights do not fill their tensor");
  return m;
}

// y[rows, n] = x[rows, k] · w[n, k]ᵀ, row-major: column-major yᵀ = w · xᵀ.
void cuda_executor::gemm(const void* x, std::int64_t rows, const void* w, std::int64_t n, std::int64_t k, void* y,
                         bool f32_out) {
  if (rows == 0) return;
  const float one = 1.0f, zero = 0.0f;
  const auto t = o_.act == dtype::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublas_ok(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                         static_cast<int>(k), &one, w, t, static_cast<int>(k), x, t, static_cast<int>(k), &zero, y,
                         f32_out ? CUDA_R_32F : t, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
}

void cuda_executor::all_reduce(void* data, std::int64_t n) {
  if (comm_ == nullptr) return; // one rank, not asked to go through NCCL
  nccl_ok(ncclAllReduce(data, data, static_cast<std::size_t>(n), o_.act == dtype::bf16 ? ncclBfloat16 : ncclFloat32,
                        ncclSum, comm_, stream_),
          "ncclAllReduce");
}

// Splits of a decode's context: enough CTAs to cover the device twice.
auto cuda_executor::decode_splits(std::int32_t seqs) const -> int {
  const auto ctas = static_cast<std::int64_t>(std::max(seqs, 1)) * c_.num_key_value_heads;
  return static_cast<int>(std::clamp<std::int64_t>(2 * sms_ / ctas, 1, max_splits_));
}

// Everything from the embedding to the sampled rows' logits, on the stream
// (capturable: fixed addresses, no host synchronisation).
void cuda_executor::forward(const step_plan& plan, std::int32_t rows, std::int32_t num_decode_rows,
                            std::int32_t num_samples) {
  const std::int64_t d = c_.hidden_size, hd = c_.head_dim, nh = c_.num_attention_heads, nkv = c_.num_key_value_heads;
  const std::int64_t inter = c_.intermediate_size;
  const auto eps = static_cast<float>(c_.rms_norm_eps);
  const auto act = o_.act;
  kernels::embedding(act, {embed_.get(), dev_.tokens, rows, d, x_.get()}, stream_);
  kernels::decode_attention_params dp;
  dp.q = qkv_.get();
  dp.q_stride = qkv_cols_;
  dp.q_rows = dev_.q_rows;
  dp.block_tables = dev_.block_tables;
  dp.max_blocks = plan.max_blocks;
  dp.context_lens = dev_.context_lens;
  dp.out = att_.get();
  dp.num_seqs = num_decode_rows;
  dp.num_q_heads = nh;
  dp.num_kv_heads = nkv;
  dp.head_dim = hd;
  dp.block_size = o_.block_size;
  dp.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  dp.num_splits = decode_splits(num_decode_rows);
  dp.workspace = workspace_.as<float>();
  kernels::prefill_attention_params pp;
  pp.q = qkv_.get();
  pp.q_stride = qkv_cols_;
  pp.positions = dev_.positions;
  pp.row_seq = dev_.row_seq;
  pp.tile_first_row = dev_.tile_first;
  pp.tile_num_rows = dev_.tile_rows;
  pp.num_tiles = static_cast<std::int64_t>(plan.tile_first_row.size());
  pp.block_tables = dev_.block_tables;
  pp.max_blocks = plan.max_blocks;
  pp.out = att_.get();
  pp.num_q_heads = nh;
  pp.num_kv_heads = nkv;
  pp.head_dim = hd;
  pp.block_size = o_.block_size;
  pp.scale = dp.scale;

  for (std::size_t li = 0; li < layers_.size(); ++li) {
    auto& l = layers_[li];
    // The previous layer's MLP output joins the residual inside the norm.
    kernels::rms_norm(act, {x_.get(), li == 0 ? nullptr : proj_.get(), l.attn_norm.as<float>(), xn_.get(), rows, d, eps},
                      stream_);
    gemm(xn_.get(), rows, l.wqkv.get(), qkv_cols_, d, qkv_.get(), false);
    kernels::rope(act, {qkv_.get(), qkv_cols_, dev_.positions, cos_.as<float>(), sin_.as<float>(), rows, nh, nkv, hd},
                  stream_);
    kernels::kv_append(act, {qkv_.get(), qkv_cols_, nh * hd, (nh + nkv) * hd, dev_.slots, l.k_cache.get(),
                             l.v_cache.get(), rows, nkv, hd, o_.block_size},
                       stream_);
    dp.k_cache = pp.k_cache = l.k_cache.get();
    dp.v_cache = pp.v_cache = l.v_cache.get();
    kernels::decode_attention(act, dp, stream_);
    kernels::prefill_attention(act, pp, stream_);
    gemm(att_.get(), rows, l.wo.get(), d, nh * hd, proj_.get(), false);
    all_reduce(proj_.get(), rows * d);
    kernels::rms_norm(act, {x_.get(), proj_.get(), l.mlp_norm.as<float>(), xn_.get(), rows, d, eps}, stream_);
    gemm(xn_.get(), rows, l.w_gate_up.get(), 2 * inter, d, gate_up_.get(), false);
    kernels::swiglu(act, {gate_up_.get(), act_.get(), rows, inter}, stream_);
    gemm(act_.get(), rows, l.w_down.get(), d, inter, proj_.get(), false);
    all_reduce(proj_.get(), rows * d);
  }
  kernels::rms_norm(act, {x_.get(), proj_.get(), final_norm_.as<float>(), xn_.get(), rows, d, eps}, stream_);
  // Only the sampled rows go through the head (a gather is an embedding look-up in xn).
  kernels::embedding(act, {xn_.get(), dev_.sample_rows, num_samples, d, last_.get()}, stream_);
  gemm(last_.get(), num_samples, lm_head_, c_.vocab_size, d, logits_.get(), true);
}

void cuda_executor::swap(const scheduler_output& step) {
  if (step.swap_out.empty() && step.swap_in.empty()) return;
  TROUPE_CHECK(o_.num_host_blocks > 0, "a swap with no host swap space");
  const auto host = [&](block_id h, std::size_t layer, int kv) {
    TROUPE_CHECK(h >= 0 && h < o_.num_host_blocks, "host block id out of range");
    return host_swap_.as<std::byte>() + ((static_cast<std::size_t>(h) * layers_.size() + layer) * 2 + static_cast<std::size_t>(kv)) * block_bytes_;
  };
  const auto dev = [&](const device_memory& m, block_id b) { return static_cast<std::byte*>(m.get()) + static_cast<std::size_t>(b) * block_bytes_; };
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    for (const auto& c : step.swap_out) {
      cuda_ok(cudaMemcpyAsync(host(c.to, li, 0), dev(layers_[li].k_cache, c.from), block_bytes_, cudaMemcpyDeviceToHost, stream_), "swap out");
      cuda_ok(cudaMemcpyAsync(host(c.to, li, 1), dev(layers_[li].v_cache, c.from), block_bytes_, cudaMemcpyDeviceToHost, stream_), "swap out");
    }
    for (const auto& c : step.swap_in) {
      cuda_ok(cudaMemcpyAsync(dev(layers_[li].k_cache, c.to), host(c.from, li, 0), block_bytes_, cudaMemcpyHostToDevice, stream_), "swap in");
      cuda_ok(cudaMemcpyAsync(dev(layers_[li].v_cache, c.to), host(c.from, li, 1), block_bytes_, cudaMemcpyHostToDevice, stream_), "swap in");
    }
  }
}

// Inputs into pinned memory, one copy to the device.
void cuda_executor::upload_inputs(std::int32_t decode_rows, std::int32_t head_rows) {
  auto* h = host_in_.as<std::int32_t>();
  const auto put = [&](std::int32_t* dev_at, const std::vector<std::int32_t>& v, std::size_t pad_to = 0) {
    auto* at = h + (dev_at - in_.as<std::int32_t>());
    std::copy(v.begin(), v.end(), at);
    std::fill(at + v.size(), at + std::max(pad_to, v.size()), 0);
  };
  put(dev_.tokens, plan_.tokens);
  put(dev_.positions, plan_.positions);
  put(dev_.slots, plan_.slots);
  put(dev_.row_seq, plan_.row_seq);
  put(dev_.block_tables, plan_.block_tables);
  put(dev_.context_lens, plan_.context_lens);
  std::vector<std::int32_t> q_rows(static_cast<std::size_t>(decode_rows));
  std::iota(q_rows.begin(), q_rows.end(), 0);
  put(dev_.q_rows, q_rows);
  put(dev_.tile_first, plan_.tile_first_row);
  put(dev_.tile_rows, plan_.tile_num_rows);
  put(dev_.sample_rows, plan_.sample_rows, static_cast<std::size_t>(head_rows));
  const auto used = static_cast<std::size_t>(dev_.block_tables - in_.as<std::int32_t>()) + plan_.block_tables.size();
  cuda_ok(cudaMemcpyAsync(in_.get(), host_in_.as<void>(), used * 4, cudaMemcpyHostToDevice, stream_), "inputs");
}

// The forward pass: a graph per padded batch size (captured on first use), or launched directly.
void cuda_executor::run_forward(bool graphed, std::int32_t rows, std::int32_t decode_rows, std::int32_t head_rows) {
  if (graphed) {
    auto it = graphs_.find(rows);
    if (it == graphs_.end()) {
      cudaGraph_t g = nullptr;
      cuda_ok(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture");
      forward(plan_, rows, decode_rows, head_rows);
      cuda_ok(cudaStreamEndCapture(stream_, &g), "end capture");
      cudaGraphExec_t exec = nullptr;
      cuda_ok(cudaGraphInstantiate(&exec, g, 0), "instantiate graph");
      cudaGraphDestroy(g);
      it = graphs_.emplace(rows, exec).first;
    }
    cuda_ok(cudaGraphLaunch(it->second, stream_), "graph launch");
  } else {
    forward(plan_, rows, decode_rows, head_rows);
  }
  cuda_ok(cudaGetLastError(), "forward");
}

// The step's penalty lists to the device, growing their buffers as needed.
void cuda_executor::upload_penalties() {
  const auto ptok = samplers_.penalty_tokens(), pcnt = samplers_.penalty_counts();
  if (static_cast<std::int64_t>(ptok.size()) > penalty_capacity_) {
    penalty_capacity_ = std::max<std::int64_t>(2 * penalty_capacity_, static_cast<std::int64_t>(ptok.size()));
    penalty_tokens_ = device_memory(static_cast<std::size_t>(penalty_capacity_) * 4);
    penalty_counts_ = device_memory(static_cast<std::size_t>(penalty_capacity_) * 4);
    host_penalty_tokens_ = pinned_memory(static_cast<std::size_t>(penalty_capacity_) * 4);
    host_penalty_counts_ = pinned_memory(static_cast<std::size_t>(penalty_capacity_) * 4);
  }
  if (!ptok.empty()) {
    std::copy(ptok.begin(), ptok.end(), host_penalty_tokens_.as<std::int32_t>());
    std::copy(pcnt.begin(), pcnt.end(), host_penalty_counts_.as<std::int32_t>());
    cuda_ok(cudaMemcpyAsync(penalty_tokens_.get(), host_penalty_tokens_.as<void>(), ptok.size() * 4, cudaMemcpyHostToDevice, stream_), "penalties");
    cuda_ok(cudaMemcpyAsync(penalty_counts_.get(), host_penalty_counts_.as<void>(), pcnt.size() * 4, cudaMemcpyHostToDevice, stream_), "penalties");
  }
}

// Host-sampled rows need their raw logits before the kernel overwrites them.
void cuda_executor::copy_host_logits(std::int32_t samples) {
  const auto vocab = static_cast<std::size_t>(c_.vocab_size);
  if (samplers_.any_on_host()) {
    host_logits_.resize(static_cast<std::size_t>(samples) * vocab);
    cuda_ok(cudaMemcpyAsync(host_logits_.data(), logits_.get(), host_logits_.size() * 4, cudaMemcpyDeviceToHost, stream_), "logits");
  }
}

// The sampling parameters to the device and the sampling kernel on the logits.
void cuda_executor::launch_sampling(std::int32_t samples) {
  cuda_ok(cudaMemcpyAsync(sample_params_.get(), host_params_.as<void>(), static_cast<std::size_t>(samples) * sizeof(kernels::sampling_row),
                          cudaMemcpyHostToDevice, stream_), "sampling parameters");
  kernels::sampling_params sp;
  sp.logits = logits_.as<float>();
  sp.rows = samples;
  sp.vocab = o_.num_sampled_ids; // only ids the tokenizer can spell; rows stay vocab_size apart
  sp.row_stride = c_.vocab_size;
  sp.row_params = sample_params_.as<kernels::sampling_row>();
  sp.penalty_tokens = penalty_tokens_.as<std::int32_t>();
  sp.penalty_counts = penalty_counts_.as<std::int32_t>();
  sp.raw = raw_.as<float>();
  sp.tokens = out_tokens_.as<std::int32_t>();
  sp.logprobs = out_logprobs_.as<float>();
  kernels::sample(sp, stream_);
  cuda_ok(cudaGetLastError(), "sample");
}

// The sampled tokens and logprobs back to the host, waiting for the step; one result per sampled sequence.
void cuda_executor::collect_samples(const scheduler_output& step, std::int32_t samples, step_result& out) {
  const auto vocab = static_cast<std::size_t>(c_.vocab_size);
  cuda_ok(cudaMemcpyAsync(host_out_tokens_.as<void>(), out_tokens_.get(), static_cast<std::size_t>(samples) * 4, cudaMemcpyDeviceToHost, stream_), "tokens");
  cuda_ok(cudaMemcpyAsync(host_out_logprobs_.as<void>(), out_logprobs_.get(), static_cast<std::size_t>(samples) * 4, cudaMemcpyDeviceToHost, stream_), "logprobs");
  cuda_ok(cudaStreamSynchronize(stream_), "step");
  for (std::int32_t j = 0; j < samples; ++j) {
    const auto& c = step.scheduled[static_cast<std::size_t>(plan_.sample_chunks[static_cast<std::size_t>(j)])];
    const auto row = samplers_.any_on_host()
                         ? std::span(host_logits_).subspan(static_cast<std::size_t>(j) * vocab,
                                                           static_cast<std::size_t>(o_.num_sampled_ids))
                         : std::span<float>();
    out.sampled.push_back({c.id, samplers_.result(static_cast<std::size_t>(j), host_out_tokens_.as<std::int32_t>()[j],
                                                  host_out_logprobs_.as<float>()[j], row), {}});
  }
}

auto cuda_executor::execute(const scheduler_output& step) -> step_result {
  cuda_ok(cudaSetDevice(o_.device), "cudaSetDevice"); // the current device is per thread
  swap(step);
  samplers_.add(step.new_requests);
  tables_.apply(step);
  step_result out;
  if (!step.scheduled.empty()) {
    plan_step(step, tables_, o_.block_size, kernels::prefill_tile_rows, o_.cuda_graphs ? o_.max_num_seqs : 0, plan_,
              max_blocks_);
    const auto rows = plan_.num_rows();
    TROUPE_CHECK(rows <= max_rows_, "a step larger than max_num_batched_tokens");
    TROUPE_CHECK(plan_.max_blocks <= max_blocks_, "a sequence longer than max_model_len");
    const auto decode_rows = plan_.num_decode + plan_.num_padding;
    const auto samples = static_cast<std::int32_t>(plan_.sample_rows.size());
    TROUPE_CHECK(samples <= o_.max_num_seqs, "more sampled sequences than max_num_seqs");
    for (std::int32_t i = 0; i < rows; ++i) {
      TROUPE_CHECK(plan_.tokens[static_cast<std::size_t>(i)] >= 0 && plan_.tokens[static_cast<std::size_t>(i)] < c_.vocab_size,
                   "token id outside the vocabulary");
      TROUPE_CHECK(plan_.positions[static_cast<std::size_t>(i)] < o_.max_model_len, "a position past max_model_len");
    }
    // A graph runs the head on every padded row; otherwise only the sampled ones.
    const bool graphed = plan_.num_padding > 0 || (o_.cuda_graphs && plan_.decode_only() &&
                                                   graph_batch_size(rows, o_.max_num_seqs) == rows);
    const std::int32_t head_rows = graphed ? rows : samples;
    upload_inputs(decode_rows, head_rows);
    run_forward(graphed, rows, decode_rows, head_rows);

    // Sampling: the device for most rows; requests asking for logprobs on the host.
    samplers_.prepare(step, plan_.sample_chunks);
    std::copy(samplers_.rows().begin(), samplers_.rows().end(), host_params_.as<kernels::sampling_row>());
    upload_penalties();
    copy_host_logits(samples);
    launch_sampling(samples);
    collect_samples(step, samples, out);
  } else {
    cuda_ok(cudaStreamSynchronize(stream_), "swap");
  }
  tables_.forget_finished(step);
  samplers_.forget(step.finished);
  return out;
}

} // namespace

auto make_device_executor(const model_weights& weights, const cuda_executor_options& options)
    -> std::unique_ptr<executor> {
  return std::make_unique<cuda_executor>(weights, options);
}

} // namespace troupe::cuda
