#include "engine/model/tensor_parallel.hpp"

#include "engine/formats/model_error.hpp"

#include <cstring>
#include <memory>
#include <string>

namespace troupe {
namespace {

// Columns [first, first + count) of w: a copy, owned by `storage`. A
// quantized matrix is cut between its blocks only.
auto column_slice(const weight_tensor& w, std::int64_t first, std::int64_t count,
                  std::vector<std::shared_ptr<const void>>& storage) -> weight_tensor {
  weight_tensor s;
  s.type = w.type;
  s.quant = w.quant;
  s.rows = w.rows;
  s.cols = count;
  const auto row_bytes = s.row_bytes(); // count columns' bytes
  if (w.quant) {
    const auto block = gguf::traits(static_cast<std::uint32_t>(*w.quant))->block_elements;
    if (first % block != 0 || count % block != 0)
      throw model_error("tensor parallelism: a " + std::string(w.type_name()) + " matrix of " +
                        std::to_string(w.cols) + " columns splits inside its " + std::to_string(block) +
                        "-value blocks");
  }
  auto before = s; // the first columns, to count their bytes
  before.cols = first;
  const auto skip = before.row_bytes();
  auto bytes = std::shared_ptr<std::byte[]>(new std::byte[static_cast<std::size_t>(w.rows * row_bytes)]);
  for (std::int64_t r = 0; r < w.rows; ++r)
    std::memcpy(bytes.get() + r * row_bytes, static_cast<const std::byte*>(w.row(r)) + skip,
                static_cast<std::size_t>(row_bytes));
  s.data = bytes.get();
  storage.push_back(std::move(bytes));
  return s;
}

// Each expert sharded as a dense MLP is; the router replicated, so every
// rank picks the same experts.
auto shard_experts(const expert_weights& e, tp_rank r, std::int64_t inter,
                   std::vector<std::shared_ptr<const void>>& storage) -> expert_weights {
  expert_weights x;
  x.router = e.router;
  x.router_bias = e.router_bias;
  if (e.gate_bias.data != nullptr) {
    x.gate_bias = column_slice(e.gate_bias, r.rank * inter, inter, storage);
    x.up_bias = column_slice(e.up_bias, r.rank * inter, inter, storage);
    if (r.rank == 0) x.down_bias = e.down_bias;
  }
  for (std::size_t i = 0; i < e.gate.size(); ++i) {
    x.gate.push_back(e.gate[i].rows_view(r.rank * inter, inter));
    x.up.push_back(e.up[i].rows_view(r.rank * inter, inter));
    x.down.push_back(column_slice(e.down[i], r.rank * inter, inter, storage));
  }
  return x;
}

} // namespace

void check_shardable(const model_config& c, int world) {
  const auto fail_with = [&](const std::string& what, std::int64_t n) {
    throw model_error("tensor parallelism over " + std::to_string(world) + " ranks: " + what + " (" +
                      std::to_string(n) + ") does not divide by " + std::to_string(world));
  };
  if (world < 1) throw model_error("tensor parallelism needs at least one rank, not " + std::to_string(world));
  if (c.num_attention_heads % world != 0) fail_with("num_attention_heads", c.num_attention_heads);
  if (c.num_key_value_heads % world != 0) fail_with("num_key_value_heads", c.num_key_value_heads);
  if (c.intermediate_size % world != 0) fail_with("intermediate_size", c.intermediate_size);
  if (c.moe_intermediate_size % world != 0) fail_with("moe_intermediate_size", c.moe_intermediate_size);
  if (c.family() == model_family::olmoe && world > 1)
    throw model_error("tensor parallelism: OLMoE's q/k norms span every head at once, which troupe does not shard");
}

auto shard_weights(const model_weights& full, tp_rank r) -> model_weights {
  check_shardable(full.config, r.world);
  if (r.rank < 0 || r.rank >= r.world)
    throw model_error("tensor parallelism: rank " + std::to_string(r.rank) + " is not in [0, " +
                      std::to_string(r.world) + ")");
  const auto& c = full.config;
  const std::int64_t hd = c.head_dim;
  const std::int64_t heads = c.num_attention_heads / r.world, kv_heads = c.num_key_value_heads / r.world;
  const std::int64_t inter = c.intermediate_size / r.world;
  model_weights s;
  s.config = c;
  s.config.num_attention_heads = heads;
  s.config.num_key_value_heads = kv_heads;
  s.config.intermediate_size = inter;
  s.config.moe_intermediate_size = c.moe_intermediate_size / r.world;
  s.embed = full.embed;
  s.final_norm = full.final_norm;
  s.lm_head = full.lm_head;
  s.layers.reserve(full.layers.size());
  for (const auto& l : full.layers) {
    layer_weights x;
    x.attn_norm = l.attn_norm;
    x.mlp_norm = l.mlp_norm;
    x.wq = l.wq.rows_view(r.rank * heads * hd, heads * hd);
    x.wk = l.wk.rows_view(r.rank * kv_heads * hd, kv_heads * hd);
    x.wv = l.wv.rows_view(r.rank * kv_heads * hd, kv_heads * hd);
    x.wo = column_slice(l.wo, r.rank * heads * hd, heads * hd, s.storage);
    if (l.experts.empty()) {
      x.w_gate = l.w_gate.rows_view(r.rank * inter, inter);
      x.w_up = l.w_up.rows_view(r.rank * inter, inter);
      x.w_down = column_slice(l.w_down, r.rank * inter, inter, s.storage);
    } else {
      x.experts = shard_experts(l.experts, r, c.moe_intermediate_size / r.world, s.storage);
    }
    // Biases follow their rows; per-head norms and the norms on the
    // all-reduced hidden state are replicated.
    // gpt-oss: each rank's heads' sinks; o_proj's bias on rank 0 only, as
    // the all-reduce sums the ranks' shares (the experts' down bias too).
    if (l.sinks.data != nullptr) x.sinks = column_slice(l.sinks, r.rank * heads, heads, s.storage);
    if (r.rank == 0) x.bo = l.bo;
    if (l.bq.data != nullptr) {
      x.bq = column_slice(l.bq, r.rank * heads * hd, heads * hd, s.storage);
      x.bk = column_slice(l.bk, r.rank * kv_heads * hd, kv_heads * hd, s.storage);
      x.bv = column_slice(l.bv, r.rank * kv_heads * hd, kv_heads * hd, s.storage);
    }
    x.q_norm = l.q_norm;
    x.k_norm = l.k_norm;
    x.post_attn_norm = l.post_attn_norm;
    x.post_mlp_norm = l.post_mlp_norm;
    s.layers.push_back(x);
  }
  return s;
}

} // namespace troupe
