#pragma once
// A decoder's hyper-parameters, read from a Hugging Face config.json
// (+ generation_config.json where present): Llama, Mistral, Qwen2, Qwen3,
// Gemma 2, Gemma 3 (text) and Phi-3, and the mixtures of experts Qwen3-MoE,
// Mixtral and OLMoE. A field troupe does not implement stops
// loading with one line naming it, so that no model computes silently wrong.

#include "base/types.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// RoPE frequency scaling ("rope_scaling"), transformers' names
/// (modeling_rope_utils.py).
struct rope_scaling_config {
  /// llama3, linear, dynamic, yarn or longrope; empty: none. freq_factors:
  /// a GGUF file's per-dimension divisors (its rope_freqs tensor), in
  /// short_factor.
  std::string type;
  double factor = 1.0;
  double low_freq_factor = 1.0;     ///< llama3
  double high_freq_factor = 4.0;    ///< llama3
  /// llama3, yarn (default: max_position_embeddings), longrope (Phi-3 keeps
  /// it at the top level of config.json; read from there).
  std::int64_t original_max_position_embeddings = 8192;
  double attention_factor = 0.0;    ///< yarn, longrope: scales cos and sin; 0: derived from factor
  double beta_fast = 32.0;          ///< yarn
  double beta_slow = 1.0;           ///< yarn
  /// yarn: the correction range rounded outwards to whole dimensions
  /// (transformers' default, and llama.cpp always); gpt-oss's is not.
  bool truncate = true;
  std::vector<double> short_factor; ///< longrope, freq_factors: head_dim / 2 each
  std::vector<double> long_factor;  ///< longrope: used from original_max_position_embeddings on

  static auto llama3(double factor, double low, double high, std::int64_t original) -> rope_scaling_config {
    rope_scaling_config s;
    s.type = "llama3";
    s.factor = factor;
    s.low_freq_factor = low;
    s.high_freq_factor = high;
    s.original_max_position_embeddings = original;
    return s;
  }
  static auto linear(double factor) -> rope_scaling_config {
    rope_scaling_config s;
    s.type = "linear";
    s.factor = factor;
    return s;
  }

  friend auto operator==(const rope_scaling_config&, const rope_scaling_config&) -> bool = default;
};

/// How a family's layers differ from Llama's; from the architecture name.
enum class model_family : std::uint8_t {
  llama,  ///< LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM
  qwen2,  ///< q/k/v biases
  qwen3,  ///< per-head q/k RMSNorm before RoPE (Qwen3ForCausalLM, Qwen3MoeForCausalLM)
  gemma2, ///< GeGLU, (1 + w) norms, four norms a layer, soft-caps, scaled embeddings
  gemma3, ///< gemma2's shape with q/k norms and local/global RoPE bases
  phi3,   ///< fused qkv_proj and gate_up_proj
  olmoe,  ///< q/k RMSNorm over the whole projection (every head at once), before RoPE
  /// q/k/v/o biases, a learned attention sink per head, a 128-token window
  /// on alternate layers; experts with biases, routed by the top k of the
  /// (biased) logits and a softmax over those k, and a clamped SwiGLU.
  gpt_oss,
};

struct model_config {
  std::string architecture = "LlamaForCausalLM"; ///< see supported_architectures()
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0; ///< defaults to num_attention_heads
  std::int64_t head_dim = 0;            ///< defaults to hidden / heads
  std::int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  rope_scaling_config rope_scaling;
  bool tie_word_embeddings = false;
  /// The MLP's activation: "silu" (SwiGLU) or "gelu_pytorch_tanh" (Gemma's GeGLU).
  std::string hidden_act = "silu";
  /// A token attends to its last sliding_window positions (itself included)
  /// on sliding layers; 0: no window.
  std::int64_t sliding_window = 0;
  /// Per layer: true where the layer uses the window (Gemma's interleaving);
  /// empty: every layer does when sliding_window > 0 (Mistral, Phi-3).
  std::vector<bool> sliding_layers;
  /// Gemma: attention scores are scaled by query_pre_attn_scalar^-1/2
  /// instead of head_dim^-1/2; 0: head_dim.
  double query_pre_attn_scalar = 0.0;
  double attn_logit_softcapping = 0.0;  ///< Gemma 2: cap·tanh(score/cap); 0: none
  double final_logit_softcapping = 0.0; ///< Gemma 2: cap·tanh(logit/cap); 0: none
  /// Gemma 3: the RoPE base of sliding layers (unscaled); 0: rope_theta.
  double rope_local_base_freq = 0.0;
  std::string torch_dtype = "float32";
  std::optional<token_id> bos_token_id;
  std::vector<token_id> eos_token_ids;  ///< from config, overridden by generation_config

  /// Defaults from generation_config.json, applied when a request leaves them unset.
  std::optional<float> default_temperature;
  std::optional<float> default_top_p;
  std::optional<std::int32_t> default_top_k;
  std::optional<float> default_min_p;
  std::optional<float> default_repetition_penalty;
  /// max_new_tokens: a request's max_tokens when it gives none (else the
  /// rest of the context).
  std::optional<std::int32_t> default_max_tokens;

  /// Mixture of experts (Qwen3-MoE, Mixtral, OLMoE): every layer's MLP is
  /// num_experts MLPs of moe_intermediate_size, of which a router picks
  /// num_experts_per_tok per token: the largest of the softmax over all
  /// experts' logits (ties: the lower expert index), their outputs summed
  /// weighted by those probabilities. 0: a dense MLP of intermediate_size.
  std::int64_t num_experts = 0;
  std::int64_t num_experts_per_tok = 0;
  std::int64_t moe_intermediate_size = 0; ///< Mixtral and OLMoE: their intermediate_size
  /// The chosen experts' weights rescaled to sum to one (Qwen3-MoE's and
  /// OLMoE's norm_topk_prob; always for Mixtral).
  bool norm_topk_prob = false;
  /// gpt-oss: gate and up clamped to this (up also below, at -limit) before
  /// its SwiGLU, gate · σ(1.702 · gate) · (up + 1); 0 elsewhere.
  double swiglu_limit = 0.0;
  /// gpt-oss's official checkpoints: experts as MXFP4 blocks and scales
  /// (quantization_config {"quant_method": "mxfp4"}).
  bool mxfp4_experts = false;

  auto is_moe() const -> bool { return num_experts > 0; }
  /// The width of a layer's MLP: an expert's where the model has experts.
  auto mlp_width() const -> std::int64_t { return is_moe() ? moe_intermediate_size : intermediate_size; }

  auto family() const -> model_family;
  /// Whether layer l attends through the sliding window.
  auto is_sliding(std::int64_t l) const -> bool {
    return sliding_window > 0 && (sliding_layers.empty() || sliding_layers[static_cast<std::size_t>(l)]);
  }

  /// Reads dir/config.json and, if present, dir/generation_config.json; or,
  /// where dir is a GGUF file, its metadata (gguf_model_config).
  /// Throws model_error naming the file and the problem (missing file, bad
  /// JSON, missing or non-positive field, unsupported architecture, heads
  /// not dividing evenly).
  static auto load(const std::filesystem::path& dir) -> model_config;

  /// Writes config.json (HF field names) and generation_config.json (BOS/EOS
  /// ids and the default_* values that are set) into dir, for make-model and
  /// tests, so that load(dir) == *this. Validates first; throws model_error.
  void save(const std::filesystem::path& dir) const;

  /// Checks field relationships; throws model_error("<file>: <problem>").
  void validate(const std::string& file) const;

  /// The architectures load() accepts, comma-separated, for error messages.
  static auto supported_architectures() -> std::string;

  friend auto operator==(const model_config&, const model_config&) -> bool = default;
};

class tokenizer;

/// The tokens that end generation: the model config's (generation_config
/// included), else the tokenizer's EOS.
auto eos_token_ids(const model_config& config, const tokenizer& tok) -> std::vector<token_id>;

} // namespace troupe
