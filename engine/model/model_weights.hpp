#pragma once
// The tensors of a decoder (Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3, and
// the mixtures of experts Qwen3-MoE, Mixtral and OLMoE), as
// views into memory-mapped safetensors files (F32 used in place; F16/BF16
// converted on the fly by the backend, so a 7B BF16 checkpoint is never
// widened in memory). Every family is mapped onto one layer shape; the
// fields a family lacks stay empty (data == nullptr).

#include "base/dtype.hpp"
#include "engine/formats/gguf.hpp"
#include "engine/model/model_config.hpp"
#include "engine/model/weight_layout.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace troupe {

/// A 2-D (or 1-D: rows == 1) tensor that the model does not own: row-major
/// as loaded; the CPU backend packs its float matrices (place_in_huge_pages).
struct weight_tensor {
  /// The element type; for a quantized matrix, the float type it was
  /// quantized from (F32 for a GGUF file's: llama.cpp computes in F32).
  dtype type = dtype::f32;
  const void* data = nullptr; ///< stored_rows() rows of row_bytes()
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  weight_layout layout = weight_layout::row_major;
  /// Set for a block-quantized matrix (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4; see
  /// gguf_quant.hpp): each row is cols / block values of ggml blocks, as in
  /// a GGUF file, always row-major.
  std::optional<gguf::tensor_type> quant;

  auto numel() const -> std::int64_t { return rows * cols; }
  /// rows, rounded up to 16 when packed16 (the padding rows are zero).
  auto stored_rows() const -> std::int64_t { return layout == weight_layout::packed16 ? (rows + 15) / 16 * 16 : rows; }
  /// Bytes of one row-major row.
  auto row_bytes() const -> std::int64_t {
    if (quant) {
      const auto t = gguf::traits(static_cast<std::uint32_t>(*quant));
      return cols / t->block_elements * t->block_bytes;
    }
    return cols * static_cast<std::int64_t>(dtype_size(type));
  }
  auto num_bytes() const -> std::size_t { return static_cast<std::size_t>(stored_rows() * row_bytes()); }
  /// Row r's start; row-major tensors only.
  auto row(std::int64_t r) const -> const void* { return static_cast<const std::byte*>(data) + r * row_bytes(); }
  /// Rows [first, first + count) as a view, no copy; row-major tensors only
  /// (a fused matrix's parts, a tensor-parallel shard).
  auto rows_view(std::int64_t first, std::int64_t count) const -> weight_tensor {
    weight_tensor v = *this;
    v.data = row(first);
    v.rows = count;
    return v;
  }
  /// "Q4_K", "BF16": the stored type, as messages print it.
  auto type_name() const -> std::string_view { return quant ? gguf::type_name(*quant) : dtype_name(type); }
};

/// A mixture-of-experts MLP (config.is_moe()), in place of the dense one.
/// Each expert's matrices are views: into a GGUF file's 3-D tensors (one
/// slice an expert), or a checkpoint's tensors of that expert.
struct expert_weights {
  weight_tensor router;             ///< [num_experts, hidden], F32 as llama.cpp keeps it (HF: mlp.gate)
  std::vector<weight_tensor> gate;  ///< per expert [moe_intermediate, hidden]
  std::vector<weight_tensor> up;    ///< per expert [moe_intermediate, hidden]
  std::vector<weight_tensor> down;  ///< per expert [hidden, moe_intermediate]
  /// gpt-oss's biases, F32: the router's [1, num_experts], and per expert
  /// rows of [num_experts, moe_intermediate] (gate, up) and [num_experts, hidden] (down).
  weight_tensor router_bias, gate_bias, up_bias, down_bias;

  auto empty() const -> bool { return router.data == nullptr; }
  /// Every expert matrix, for passes over all tensors.
  auto matrices() -> std::vector<weight_tensor*> {
    std::vector<weight_tensor*> all;
    for (auto* v : {&gate, &up, &down})
      for (auto& t : *v) all.push_back(&t);
    return all;
  }
};

/// HF names: model.layers.{i}.{input_layernorm, self_attn.{q,k,v,o}_proj,
/// post_attention_layernorm, mlp.{gate,up,down}_proj}.weight. Gemma's norms
/// hold 1 + w (its RMSNorm's scale), so every family runs x̂ · w.
struct layer_weights {
  weight_tensor attn_norm; ///< [1, hidden], always F32
  weight_tensor wq;        ///< [heads * head_dim, hidden]; Phi-3: rows of qkv_proj (a view)
  weight_tensor wk;        ///< [kv_heads * head_dim, hidden]
  weight_tensor wv;        ///< [kv_heads * head_dim, hidden]
  weight_tensor wo;        ///< [hidden, heads * head_dim]
  /// Pre-MLP norm [1, hidden], F32: post_attention_layernorm, Gemma's
  /// pre_feedforward_layernorm.
  weight_tensor mlp_norm;
  weight_tensor w_gate;    ///< [intermediate, hidden]; Phi-3: rows of gate_up_proj (a view)
  weight_tensor w_up;      ///< [intermediate, hidden]
  weight_tensor w_down;    ///< [hidden, intermediate]
  expert_weights experts;  ///< a mixture of experts' MLP, in place of w_gate, w_up and w_down

  // Present only in the families that have them:
  weight_tensor bq, bk, bv;       ///< Qwen2, gpt-oss: q/k/v biases [1, rows], F32
  weight_tensor bo;               ///< gpt-oss: o_proj's bias [1, hidden], F32
  weight_tensor sinks;            ///< gpt-oss: each head's attention sink logit [1, heads], F32
  /// Qwen3, Gemma 3: per-head RMSNorm [1, head_dim], F32; OLMoE: over the
  /// whole projection, [1, heads * head_dim] and [1, kv_heads * head_dim].
  weight_tensor q_norm, k_norm;
  weight_tensor post_attn_norm;   ///< Gemma: post_attention_layernorm, on o_proj's output
  weight_tensor post_mlp_norm;    ///< Gemma: post_feedforward_layernorm, on down_proj's output
};

struct model_weights {
  model_config config;
  weight_tensor embed;      ///< [vocab, hidden]  model.embed_tokens.weight
  std::vector<layer_weights> layers;
  weight_tensor final_norm; ///< [1, hidden], always F32  model.norm.weight
  weight_tensor lm_head;    ///< [vocab, hidden]  lm_head.weight, or embed when tied
  /// Keeps the mappings and converted norm vectors alive.
  std::vector<std::shared_ptr<const void>> storage;

  /// Loads config.json, generation_config.json and model.safetensors or the
  /// shards named by model.safetensors.index.json from dir. Throws model_error
  /// naming the file and problem: missing file, truncated/corrupt header,
  /// missing tensor, wrong shape, unsupported dtype or architecture, a tensor
  /// the architecture does not use (it would be ignored silently), or only a
  /// pytorch_model.bin. A GGUF file instead of a directory is read by
  /// load_gguf_weights (gguf_model.hpp).
  static auto load(const std::filesystem::path& dir) -> model_weights;

  /// The first quantized matrix (the embedding, the head, then each layer's
  /// q, k, v, o, gate, up, down), or null: whether the CPU's quantized
  /// kernels are needed, and what a backend without them names.
  auto first_quantized() const -> const weight_tensor* {
    for (const auto* t : {&embed, &lm_head})
      if (t->quant) return t;
    for (const auto& l : layers) {
      for (const auto* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        if (t->quant) return t;
      for (const auto* v : {&l.experts.gate, &l.experts.up, &l.experts.down})
        for (const auto& t : *v)
          if (t.quant) return &t;
    }
    return nullptr;
  }
};

} // namespace troupe
