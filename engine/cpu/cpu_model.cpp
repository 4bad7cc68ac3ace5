#include "engine/cpu/cpu_model.hpp"

#include "base/check.hpp"
#include "engine/cpu/linear.hpp"
#include "engine/cpu/ops.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace troupe {
namespace {

auto resize(std::vector<float>& v, std::int64_t n) -> float* {
  v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// transformers scales Gemma's embeddings by √hidden as a tensor of the
// activations' dtype (the checkpoint's): rounded to it first.
auto embedding_scale(const model_weights& w) -> float {
  const auto f = w.config.family();
  if (f != model_family::gemma2 && f != model_family::gemma3) return 1.0f;
  const auto s = static_cast<float>(std::sqrt(static_cast<double>(w.config.hidden_size)));
  switch (w.embed.type) {
    case dtype::bf16: return bf16_to_f32(f32_to_bf16(s));
    case dtype::f16: return f16_to_f32(f32_to_f16(s));
    default: return s;
  }
}

auto norm_data(const weight_tensor& t) -> const float* { return static_cast<const float*>(t.data); }

} // namespace

cpu_model::cpu_model(const model_weights& weights, std::int32_t block_size,
                     std::int32_t num_kv_blocks, all_reduce* reduce, kv_dtype kv_type)
  : w_(weights),
    reduce_(reduce),
    cache_(weights.config.num_hidden_layers, num_kv_blocks, block_size,
           weights.config.num_key_value_heads, weights.config.head_dim, kv_type),
    rope_(weights.config),
    embed_scale_(embedding_scale(weights)) {
  const auto& c = weights.config;
  if (c.family() == model_family::gemma3) local_rope_.emplace(c, c.rope_local_base_freq);
}

void cpu_model::forward(std::span<const chunk> batch, bool all_logits,
                        std::vector<float>& logits) {
  const auto& c = w_.config;
  const std::int64_t d = c.hidden_size, hd = c.head_dim;
  const std::int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const std::int64_t vocab = c.vocab_size;

  // Flatten: one row per token, with its position and its sequence's table.
  rows_.clear();
  positions_.clear();
  auto& ids = token_ptrs_;
  ids.clear();
  for (const auto& ch : batch) {
    TROUPE_CHECK(!ch.tokens.empty(), "a chunk computes at least one token");
    for (std::size_t i = 0; i < ch.tokens.size(); ++i) {
      const auto pos = ch.start_position + static_cast<std::int32_t>(i);
      TROUPE_CHECK(ch.tokens[i] >= 0 && ch.tokens[i] < vocab, "token id outside the vocabulary");
      rows_.push_back({pos, ch.block_table});
      positions_.push_back(pos);
      ids.push_back(&ch.tokens[i]);
    }
  }
  const auto t_rows = static_cast<std::int64_t>(rows_.size());
  if (t_rows == 0) {
    logits.clear();
    return;
  }

  float* x = resize(x_, t_rows * d);
  for (std::int64_t t = 0; t < t_rows; ++t) load_row(w_.embed, *ids[static_cast<std::size_t>(t)], x + t * d);
  if (embed_scale_ != 1.0f) scale_in_place(x, t_rows * d, embed_scale_);
  rope_.tables(positions_.data(), t_rows, cos_, sin_);
  if (local_rope_) local_rope_->tables(positions_.data(), t_rows, local_cos_, local_sin_);

  float* xn = resize(xn_, t_rows * d);
  float* q = resize(q_, t_rows * nh * hd);
  float* k = resize(k_, t_rows * nkv * hd);
  float* v = resize(v_, t_rows * nkv * hd);
  float* att = resize(att_, t_rows * nh * hd);
  float* proj = resize(proj_, t_rows * d);
  const float scale = c.query_pre_attn_scalar > 0
                          ? 1.0f / std::sqrt(static_cast<float>(c.query_pre_attn_scalar))
                          : 0.0f; // paged_attention's default, 1/√head_dim

  for (std::size_t l = 0; l < w_.layers.size(); ++l) {
    const auto& lw = w_.layers[l];
    const auto li = static_cast<std::int64_t>(l);
    const bool sliding = c.is_sliding(li);
    rms_norm(x, norm_data(lw.attn_norm), t_rows, d, c.rms_norm_eps, xn);
    linear_multi(xn, t_rows, {{&lw.wq, q}, {&lw.wk, k}, {&lw.wv, v}});
    if (lw.bq.data != nullptr) {
      add_bias(q, norm_data(lw.bq), t_rows, nh * hd);
      add_bias(k, norm_data(lw.bk), t_rows, nkv * hd);
      add_bias(v, norm_data(lw.bv), t_rows, nkv * hd);
    }
    if (lw.q_norm.data != nullptr) { // before RoPE: per head, or (OLMoE) over all heads at once
      rms_norm(q, norm_data(lw.q_norm), t_rows * nh * hd / lw.q_norm.cols, lw.q_norm.cols, c.rms_norm_eps, q);
      rms_norm(k, norm_data(lw.k_norm), t_rows * nkv * hd / lw.k_norm.cols, lw.k_norm.cols, c.rms_norm_eps, k);
    }
    const bool local = sliding && local_rope_;
    const float* cs = local ? local_cos_.data() : cos_.data();
    const float* sn = local ? local_sin_.data() : sin_.data();
    apply_rope(q, t_rows, nh, hd, cs, sn);
    apply_rope(k, t_rows, nkv, hd, cs, sn);
    write_kv(cache_, li, rows_, k, v);
    const attention_options opts{scale, static_cast<float>(c.attn_logit_softcapping),
                                 sliding ? static_cast<std::int32_t>(std::min<std::int64_t>(c.sliding_window, INT32_MAX)) : 0,
                                 lw.sinks.data != nullptr ? norm_data(lw.sinks) : nullptr};
    paged_attention(cache_, li, rows_, q, nh, nkv, hd, att, opts);
    linear(att, t_rows, lw.wo, proj);
    if (lw.bo.data != nullptr) add_bias(proj, norm_data(lw.bo), t_rows, d); // rank 0's alone (shard_weights)
    if (reduce_ != nullptr) reduce_->sum(proj, t_rows * d); // each rank's heads' share
    if (lw.post_attn_norm.data != nullptr) rms_norm(proj, norm_data(lw.post_attn_norm), t_rows, d, c.rms_norm_eps, proj);
    add_in_place(x, proj, t_rows * d);

    rms_norm(x, norm_data(lw.mlp_norm), t_rows, d, c.rms_norm_eps, xn);
    mlp(lw, t_rows, proj);
    if (reduce_ != nullptr) reduce_->sum(proj, t_rows * d);
    if (lw.post_mlp_norm.data != nullptr) rms_norm(proj, norm_data(lw.post_mlp_norm), t_rows, d, c.rms_norm_eps, proj);
    add_in_place(x, proj, t_rows * d);
  }

  head(batch, all_logits, t_rows, logits);
}

// The layer's MLP on xn_ into proj: dense (SwiGLU or GeGLU), or a mixture
// of experts (moe_mlp, with scratch of its own).
void cpu_model::mlp(const layer_weights& lw, std::int64_t t_rows, float* proj) {
  const auto& c = w_.config;
  if (!lw.experts.empty()) return moe_.forward(c, lw.experts, xn_.data(), t_rows, proj);
  const std::int64_t inter = c.intermediate_size;
  float* gate = resize(gate_, t_rows * inter);
  float* up = resize(up_, t_rows * inter);
  linear_multi(xn_.data(), t_rows, {{&lw.w_gate, gate}, {&lw.w_up, up}});
  if (c.hidden_act == "gelu_pytorch_tanh")
    gelu_tanh_mul(gate, up, t_rows * inter);
  else
    silu_mul(gate, up, t_rows * inter);
  linear(gate, t_rows, lw.w_down, proj);
}

// The final norm and the head over the rows whose logits are wanted (x_).
void cpu_model::head(std::span<const chunk> batch, bool all_logits, std::int64_t t_rows, std::vector<float>& logits) {
  const auto& c = w_.config;
  const std::int64_t d = c.hidden_size, vocab = c.vocab_size;
  const float* x = x_.data();
  float* xn = xn_.data();
  const float* head_in = x;
  std::int64_t out_rows = t_rows;
  if (!all_logits) {
    out_rows = 0;
    for (const auto& ch : batch) out_rows += ch.all_logits ? static_cast<std::int64_t>(ch.tokens.size()) : 1;
    float* last = resize(last_, out_rows * d);
    std::int64_t row = 0, out = 0;
    for (const auto& ch : batch) {
      const auto n = static_cast<std::int64_t>(ch.tokens.size());
      const std::int64_t keep = ch.all_logits ? n : 1;
      std::memcpy(last + out * d, x + (row + n - keep) * d, static_cast<std::size_t>(keep * d) * sizeof(float));
      row += n;
      out += keep;
    }
    head_in = last;
  }
  rms_norm(head_in, norm_data(w_.final_norm), out_rows, d, c.rms_norm_eps, xn);
  logits.resize(static_cast<std::size_t>(out_rows * vocab));
  linear(xn, out_rows, w_.lm_head, logits.data());
  if (c.final_logit_softcapping > 0)
    soft_cap(logits.data(), out_rows * vocab, static_cast<float>(c.final_logit_softcapping));
}

} // namespace troupe
