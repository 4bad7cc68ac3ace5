#include "engine/model/gguf_model.hpp"

#include "engine/model/gguf_tensors.hpp"

#include <string>

namespace troupe {

using gguf_detail::tensor_reader;

namespace {

/// Layer p's attention: q/k/v (Phi-3's fused, Llama's permuted back), their
/// biases (Qwen2, gpt-oss), q/k norms, o_proj, gpt-oss's bias and sinks.
void load_attention(tensor_reader& load, const model_config& c, const std::string& p, layer_weights& l) {
  const auto fam = c.family();
  const auto d = c.hidden_size, hd = c.head_dim;
  const auto q_rows = c.num_attention_heads * hd, kv_rows = c.num_key_value_heads * hd;
  l.attn_norm = load.vector(p + "attn_norm.weight", d);
  if (fam == model_family::phi3) {
    const auto qkv = load.matrix(p + "attn_qkv.weight", q_rows + 2 * kv_rows, d);
    l.wq = qkv.rows_view(0, q_rows);
    l.wk = qkv.rows_view(q_rows, kv_rows);
    l.wv = qkv.rows_view(q_rows + kv_rows, kv_rows);
  } else if (fam == model_family::llama) {
    l.wq = load.unpermuted(p + "attn_q.weight", c.num_attention_heads, hd, d);
    l.wk = load.unpermuted(p + "attn_k.weight", c.num_key_value_heads, hd, d);
    l.wv = load.matrix(p + "attn_v.weight", kv_rows, d);
  } else {
    l.wq = load.matrix(p + "attn_q.weight", q_rows, d);
    l.wk = load.matrix(p + "attn_k.weight", kv_rows, d);
    l.wv = load.matrix(p + "attn_v.weight", kv_rows, d);
  }
  if (fam == model_family::qwen2 || fam == model_family::gpt_oss) {
    l.bq = load.vector(p + "attn_q.bias", q_rows);
    l.bk = load.vector(p + "attn_k.bias", kv_rows);
    l.bv = load.vector(p + "attn_v.bias", kv_rows);
  }
  if (fam == model_family::qwen3 || fam == model_family::gemma3) {
    l.q_norm = load.vector(p + "attn_q_norm.weight", hd);
    l.k_norm = load.vector(p + "attn_k_norm.weight", hd);
  } else if (fam == model_family::olmoe) {
    l.q_norm = load.vector(p + "attn_q_norm.weight", q_rows);
    l.k_norm = load.vector(p + "attn_k_norm.weight", kv_rows);
  }
  l.wo = load.matrix(p + "attn_output.weight", d, q_rows);
  if (fam == model_family::gpt_oss) {
    l.bo = load.vector(p + "attn_output.bias", d);
    l.sinks = load.vector(p + "attn_sinks.weight", c.num_attention_heads);
  }
}

/// Layer p's MLP and its norms: dense (Phi-3's gate and up fused), or the
/// router and the experts' 3-D tensors, an expert a slice (gpt-oss with its
/// biases).
void load_mlp(tensor_reader& load, const model_config& c, const std::string& p, layer_weights& l) {
  const auto fam = c.family();
  const auto d = c.hidden_size, inter = c.intermediate_size;
  // gpt-oss's converter names the pre-MLP norm post_attention_norm (HF's post_attention_layernorm).
  l.mlp_norm = load.vector(p + (fam == model_family::gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), d);
  if (fam == model_family::gemma2 || fam == model_family::gemma3) {
    l.post_attn_norm = load.vector(p + "post_attention_norm.weight", d);
    l.post_mlp_norm = load.vector(p + "post_ffw_norm.weight", d);
  }
  if (c.is_moe()) {
    const auto e = c.num_experts, ei = c.moe_intermediate_size;
    l.experts.router = load.matrix(p + "ffn_gate_inp.weight", e, d);
    l.experts.gate = load.experts(p + "ffn_gate_exps.weight", e, ei, d);
    l.experts.up = load.experts(p + "ffn_up_exps.weight", e, ei, d);
    l.experts.down = load.experts(p + "ffn_down_exps.weight", e, d, ei);
    if (fam == model_family::gpt_oss) {
      l.experts.router_bias = load.vector(p + "ffn_gate_inp.bias", e);
      l.experts.gate_bias = load.bias_matrix(p + "ffn_gate_exps.bias", e, ei);
      l.experts.up_bias = load.bias_matrix(p + "ffn_up_exps.bias", e, ei);
      l.experts.down_bias = load.bias_matrix(p + "ffn_down_exps.bias", e, d);
    }
    return;
  }
  if (fam == model_family::phi3) {
    const auto gate_up = load.matrix(p + "ffn_up.weight", 2 * inter, d);
    l.w_gate = gate_up.rows_view(0, inter);
    l.w_up = gate_up.rows_view(inter, inter);
  } else {
    l.w_gate = load.matrix(p + "ffn_gate.weight", inter, d);
    l.w_up = load.matrix(p + "ffn_up.weight", inter, d);
  }
  l.w_down = load.matrix(p + "ffn_down.weight", d, inter);
}

} // namespace

auto load_gguf_weights(const std::filesystem::path& file) -> model_weights {
  auto f = gguf::file::open(file);
  auto config = gguf_model_config(*f);
  return load_gguf_weights(std::move(f), std::move(config));
}

auto load_gguf_weights(std::shared_ptr<const gguf::file> f, model_config config) -> model_weights {
  model_weights w;
  w.config = std::move(config);
  const auto& c = w.config;
  tensor_reader load(*f, w);
  const auto d = c.hidden_size, hd = c.head_dim;
  // The RoPE factor tensors are the config's (gguf_model_config read them).
  if (c.rope_scaling.type == "freq_factors") load.mark_used("rope_freqs.weight", hd / 2);
  if (c.rope_scaling.type == "longrope")
    for (const auto* name : {"rope_factors_short.weight", "rope_factors_long.weight"}) load.mark_used(name, hd / 2);

  w.embed = load.matrix("token_embd.weight", c.vocab_size, d);
  w.layers.reserve(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const auto p = "blk." + std::to_string(i) + ".";
    layer_weights& l = w.layers.emplace_back();
    load_attention(load, c, p, l);
    load_mlp(load, c, p, l);
  }
  w.final_norm = load.vector("output_norm.weight", d);
  w.lm_head = c.tie_word_embeddings ? w.embed : load.matrix("output.weight", c.vocab_size, d);
  load.check_all_used(std::string(f->require_string("general.architecture")));
  w.storage.push_back(std::move(f));
  return w;
}

} // namespace troupe
