#include "engine/model/gguf_model.hpp"

#include "engine/model/gguf_tensors.hpp"

#include "engine/formats/gguf_quant.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/formats/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <string>

namespace troupe {
namespace {

using namespace std::string_literals;
using gguf_detail::widen_floats;

/// How each architecture llama.cpp names maps onto troupe's.
struct gguf_architecture {
  std::string_view gguf_name;
  const char* hf_name; ///< model_config::family() follows from it
};

constexpr gguf_architecture k_architectures[] = {
    {"llama", "LlamaForCausalLM"},   {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
    {"gemma2", "Gemma2ForCausalLM"}, {"gemma3", "Gemma3ForCausalLM"}, {"phi3", "Phi3ForCausalLM"},
    {"qwen3moe", "Qwen3MoeForCausalLM"}, {"olmoe", "OlmoeForCausalLM"}, {"gpt-oss", "GptOssForCausalLM"},
    // "llama" with expert_count > 0 is Mixtral (gguf_model_config).
};

/// The "{arch}." keys the reader understands. Any other key under the
/// architecture's prefix changes the model in a way troupe would not
/// compute (experts, logit or residual scales, ...) and is refused.
constexpr std::string_view k_known_keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.freq_base", "rope.dimension_count",
    "rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length", "rope.scaling.attn_factor",
    "rope.scaling.finetuned", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow", "rope.freq_base_swa",
    "attn_logit_softcapping", "final_logit_softcapping",
    // Written where config.json has layer_norm_eps; these RMSNorm models
    // read attention.layer_norm_rms_epsilon (llama.cpp ignores it too).
    "attention.layer_norm_epsilon",
    // A mixture of experts' (read_experts); zero means none.
    "expert_count", "expert_used_count", "expert_feed_forward_length", "attention.sliding_window_pattern",
};

/// The texts of the tokens llama.cpp's vocabulary treats as ends of
/// generation besides the file's EOS/EOT/EOM ids (its llama-vocab.cpp).
constexpr std::string_view k_end_of_turn[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<|return|>", "<|call|>", "<｜end▁of▁sentence｜>",
};

/// Typed reads of "{arch}.{key}", each failure one line naming the key.
class hparams {
public:
  hparams(const gguf::file& f, std::string_view arch) : f_(f), prefix_(std::string(arch) + ".") {}

  auto key(std::string_view k) const -> std::string { return prefix_ + std::string(k); }

  auto find(std::string_view k) const -> const gguf::value* { return f_.find(key(k)); }

  /// A positive integer; a per-layer array must hold one value.
  auto size(std::string_view k) const -> std::int64_t {
    const auto* v = find(k);
    if (v == nullptr) fail(f_.path(), "missing key '" + key(k) + "'");
    return positive(k, *v);
  }

  auto size_or(std::string_view k, std::int64_t fallback) const -> std::int64_t {
    const auto* v = find(k);
    return v == nullptr ? fallback : positive(k, *v);
  }

  auto number_or(std::string_view k, double fallback) const -> double {
    const auto* v = find(k);
    if (v == nullptr) return fallback;
    const auto d = v->as_double();
    if (!d) fail(f_.path(), "key '" + key(k) + "' is " + gguf::describe(*v) + ", expected a number");
    return *d;
  }

  auto string_or(std::string_view k, std::string_view fallback) const -> std::string_view {
    const auto* v = find(k);
    if (v == nullptr) return fallback;
    const auto s = v->as_string();
    if (!s) fail(f_.path(), "key '" + key(k) + "' is " + gguf::describe(*v) + ", expected a string");
    return *s;
  }

private:
  auto positive(std::string_view k, const gguf::value& v) const -> std::int64_t {
    if (const auto* a = v.as_array()) {
      // Per-layer values (llama.cpp allows them); troupe's layers are alike.
      if (a->items.empty()) fail(f_.path(), "key '" + key(k) + "' is an empty array");
      const auto first = positive(k, a->items.front());
      for (const auto& item : a->items)
        if (positive(k, item) != first)
          fail(f_.path(), "key '" + key(k) + "' differs between layers, which troupe does not implement");
      return first;
    }
    const auto n = v.as_int();
    if (!n) fail(f_.path(), "key '" + key(k) + "' is " + gguf::describe(v) + ", expected an integer");
    if (*n <= 0) fail(f_.path(), "key '" + key(k) + "' must be positive, got " + std::to_string(*n));
    return *n;
  }

  const gguf::file& f_;
  std::string prefix_;
};

auto optional_token(const gguf::file& f, std::string_view key) -> std::optional<token_id> {
  const auto* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  const auto n = v->as_int();
  if (!n || *n < 0 || *n > std::numeric_limits<token_id>::max())
    fail(f.path(), "key '" + std::string(key) + "' is not a token id");
  return static_cast<token_id>(*n);
}


/// A RoPE factor tensor's head_dim / 2 values (rope_freqs, Phi-3's
/// rope_factors_long/short).
auto factor_values(const gguf::file& f, const std::string& name, std::int64_t n) -> std::vector<double> {
  const auto* t = f.find_tensor(name);
  if (t == nullptr) fail(f.path(), "missing tensor '" + name + "'");
  if (t->ne != std::vector<std::int64_t>{n})
    fail(f.path(), "tensor '" + name + "' has " + std::to_string(t->numel()) + " values, expected head_dim / 2 = " +
                       std::to_string(n));
  std::vector<float> values(static_cast<std::size_t>(n));
  widen_floats(f, *t, name, values.data());
  return {values.begin(), values.end()};
}

/// Gemma's attention scale, as llama.cpp sets it: 27B models scale by
/// (hidden / heads)^-1/2 (their query_pre_attn_scalar), others by head_dim.
auto gemma_query_scalar(const model_config& c) -> double {
  const bool is_27b = (c.family() == model_family::gemma2 && c.num_hidden_layers == 46) ||
                      (c.family() == model_family::gemma3 && c.num_hidden_layers == 62);
  return static_cast<double>(is_27b ? c.hidden_size / c.num_attention_heads : c.head_dim);
}

/// The entry of general.architecture; fails listing the supported ones.
auto architecture_of(const gguf::file& f, std::string_view arch_name) -> const gguf_architecture& {
  const gguf_architecture* arch = nullptr;
  for (const auto& a : k_architectures)
    if (a.gguf_name == arch_name) arch = &a;
  if (arch == nullptr) {
    std::string known;
    for (const auto& a : k_architectures) known += (known.empty() ? "" : ", ") + std::string(a.gguf_name);
    fail(f.path(), "general.architecture '" + std::string(arch_name) + "' is not supported (supported: " + known + ")");
  }
  return *arch;
}

/// Refuses the "{arch}." keys troupe does not know.
void check_known_keys(const gguf::file& f, std::string_view arch_name) {
  const auto prefix = std::string(arch_name) + ".";
  for (const auto& [key, value] : f.metadata()) {
    if (!key.starts_with(prefix)) continue;
    const auto rest = key.substr(prefix.size());
    bool known = false;
    for (const auto k : k_known_keys) known = known || k == rest;
    // gpt-oss's alone reads the window's layer pattern (read_gpt_oss).
    if (rest == "attention.sliding_window_pattern" && arch_name != "gpt-oss") known = false;
    if (!known) fail(f.path(), "key '" + std::string(key) + "' is not implemented by troupe (loading would ignore it)");
  }
}

/// gpt-oss as llama.cpp computes it: the expert width from its own key, the
/// window on the layers sliding_window_pattern names (default: even ones),
/// SwiGLU clamped at 7 (a constant there), YaRN's range rounded outwards.
void read_gpt_oss(const gguf::file& f, const hparams& h, model_config& c) {
  const auto width = h.size("expert_feed_forward_length");
  if (width != c.intermediate_size)
    fail(f.path(), "key '" + h.key("expert_feed_forward_length") + "' differs from '" + h.key("feed_forward_length") +
                       "', which troupe does not implement");
  c.sliding_window = h.size("attention.sliding_window");
  c.sliding_layers.assign(static_cast<std::size_t>(c.num_hidden_layers), false);
  const auto* pattern = h.find("attention.sliding_window_pattern");
  const auto* items = pattern != nullptr ? pattern->as_array() : nullptr;
  if (items != nullptr && static_cast<std::int64_t>(items->items.size()) != c.num_hidden_layers)
    fail(f.path(), "key '" + h.key("attention.sliding_window_pattern") + "' does not list every layer");
  const auto period = items == nullptr ? h.size_or("attention.sliding_window_pattern", 2) : 0;
  for (std::size_t i = 0; i < c.sliding_layers.size(); ++i) {
    if (items == nullptr) {
      c.sliding_layers[i] = static_cast<std::int64_t>(i) % period < period - 1;
    } else if (const auto b = items->items[i].as_bool()) {
      c.sliding_layers[i] = *b;
    } else {
      fail(f.path(), "key '" + h.key("attention.sliding_window_pattern") + "' is not a list of booleans");
    }
  }
  c.swiglu_limit = 7.0;
}

/// A mixture of experts' sizes, as llama.cpp reads them: Mixtral ("llama"
/// with experts) and OLMoE keep the expert's width in feed_forward_length;
/// qwen3moe renormalises the chosen experts' weights, olmoe does not.
void read_experts(const gguf::file& f, const hparams& h, std::string_view arch_name, model_config& c) {
  // Dense files may say expert_count 0 (and expert_used_count 0).
  const auto experts = h.find("expert_count") == nullptr || h.number_or("expert_count", 0) == 0 ? 0 : h.size("expert_count");
  const bool moe_arch = arch_name == "qwen3moe" || arch_name == "olmoe" || arch_name == "gpt-oss";
  if (experts == 0) {
    if (moe_arch) fail(f.path(), "key '" + h.key("expert_count") + "' is missing or 0, but " + std::string(arch_name) + " has experts");
    for (const auto* key : {"expert_used_count", "expert_feed_forward_length"})
      if (h.number_or(key, 0) != 0) fail(f.path(), "key '" + h.key(key) + "' set, but the file has no experts");
    return;
  }
  if (arch_name == "llama") c.architecture = "MixtralForCausalLM";
  else if (!moe_arch)
    fail(f.path(), "key '" + h.key("expert_count") + "': experts are not implemented for " + std::string(arch_name));
  c.num_experts = experts;
  c.num_experts_per_tok = h.size("expert_used_count");
  c.moe_intermediate_size = arch_name == "qwen3moe"
                                ? h.size_or("expert_feed_forward_length", c.intermediate_size / c.num_experts_per_tok)
                                : c.intermediate_size;
  c.norm_topk_prob = arch_name != "olmoe" && arch_name != "gpt-oss";
  if (arch_name == "gpt-oss") read_gpt_oss(f, h, c);
}

/// The sizes, the context length, the norm's epsilon and the RoPE base.
void read_dimensions(const gguf::file& f, const hparams& h, model_config& c) {
  const auto fam = c.family();
  c.hidden_size = h.size("embedding_length");
  c.intermediate_size = h.size("feed_forward_length");
  c.num_hidden_layers = h.size("block_count");
  // Before anything is sized by it: each layer has tensors of its own.
  if (c.num_hidden_layers > static_cast<std::int64_t>(f.tensors().size()) ||
      f.find_tensor("blk." + std::to_string(c.num_hidden_layers - 1) + ".attn_norm.weight") == nullptr)
    fail(f.path(), "key '" + h.key("block_count") + "' is " + std::to_string(c.num_hidden_layers) +
                       ", but the file has no tensor 'blk." + std::to_string(c.num_hidden_layers - 1) +
                       ".attn_norm.weight'");
  c.num_attention_heads = h.size("attention.head_count");
  c.num_key_value_heads = h.size_or("attention.head_count_kv", c.num_attention_heads);
  if (c.hidden_size % c.num_attention_heads != 0 && h.find("attention.key_length") == nullptr)
    fail(f.path(), "key '" + h.key("embedding_length") + "' is not a multiple of " + h.key("attention.head_count"));
  c.head_dim = h.size_or("attention.key_length", c.hidden_size / c.num_attention_heads);
  if (h.size_or("attention.value_length", c.head_dim) != c.head_dim)
    fail(f.path(), "key '" + h.key("attention.value_length") + "' differs from the key length, which troupe does not implement");
  if (h.size_or("rope.dimension_count", c.head_dim) != c.head_dim)
    fail(f.path(), "key '" + h.key("rope.dimension_count") + "' rotates part of each head (partial RoPE is not implemented)");
  c.max_position_embeddings = h.size_or("context_length", c.max_position_embeddings);
  c.rms_norm_eps = h.number_or("attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  c.rope_theta = h.number_or("rope.freq_base", fam == model_family::gemma3 ? 1000000.0 : c.rope_theta);
}

/// Linear and YaRN scaling into c.rope_scaling; returns the scaling type.
auto read_rope_scaling(const gguf::file& f, const hparams& h, model_config& c) -> std::string_view {
  const auto scaling = h.string_or("rope.scaling.type", "none");
  const auto factor = h.number_or("rope.scaling.factor", 1.0);
  auto& rs = c.rope_scaling;
  if (scaling == "linear") {
    rs = rope_scaling_config::linear(factor);
  } else if (scaling == "yarn") {
    rs.type = "yarn";
    rs.factor = factor;
    rs.original_max_position_embeddings = h.size_or("rope.scaling.original_context_length", c.max_position_embeddings);
    rs.attention_factor = h.number_or("rope.scaling.attn_factor", 0.0);
    rs.beta_fast = h.number_or("rope.scaling.yarn_beta_fast", rs.beta_fast);
    rs.beta_slow = h.number_or("rope.scaling.yarn_beta_slow", rs.beta_slow);
  } else if (scaling != "none" && scaling != "longrope") {
    fail(f.path(), "key '" + h.key("rope.scaling.type") + "' is '" + std::string(scaling) +
                       "' (supported: none, linear, yarn, and Phi-3's longrope)");
  }
  return scaling;
}

/// Gemma's sliding layers, soft-caps and scale; refuses others' second RoPE base.
void read_gemma_fields(const gguf::file& f, const hparams& h, model_config& c) {
  const auto fam = c.family();
  const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
  if (gemma) {
    c.hidden_act = "gelu_pytorch_tanh";
    c.sliding_window = h.size_or("attention.sliding_window", 0);
    c.sliding_layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
    // Gemma 2 slides on even layers; Gemma 3 on five of every six.
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.sliding_layers[static_cast<std::size_t>(i)] = fam == model_family::gemma2 ? i % 2 == 0 : (i + 1) % 6 != 0;
    c.attn_logit_softcapping = h.number_or("attn_logit_softcapping", 0.0);
    c.final_logit_softcapping = h.number_or("final_logit_softcapping", 0.0);
    // The local layers' RoPE base: the file's, else llama.cpp's (and
    // transformers') default.
    if (fam == model_family::gemma3) c.rope_local_base_freq = h.number_or("rope.freq_base_swa", 10000.0);
    c.query_pre_attn_scalar = gemma_query_scalar(c);
  }
  // llama.cpp slides only Gemma's layers: it reads no window for llama and
  // qwen (a Mistral v0.1 file's 4096 included) and none for phi3 since its
  // PR 13676; troupe computes the files as llama.cpp does.
  if (!gemma) (void)h.size_or("attention.sliding_window", 0);
  if (fam != model_family::gemma3 && h.find("rope.freq_base_swa") != nullptr)
    fail(f.path(), "key '" + h.key("rope.freq_base_swa") + "': a second RoPE base is implemented for gemma3 only");
}

/// The BOS token and the tokens generation ends at.
void read_special_tokens(const gguf::file& f, model_config& c) {
  c.bos_token_id = optional_token(f, "tokenizer.ggml.bos_token_id");
  const auto add_eos = [&](token_id id) {
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(id);
  };
  for (const auto* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const auto id = optional_token(f, key)) add_eos(*id);
  // As llama.cpp does, the end-of-turn tokens a chat model stops at, by
  // their text: a GGUF file names only one EOS (Gemma's <eos>, not its
  // <end_of_turn>), where generation_config.json lists them all.
  if (const auto* tokens = f.find("tokenizer.ggml.tokens"); tokens != nullptr && tokens->as_array() != nullptr) {
    const auto& items = tokens->as_array()->items;
    for (std::size_t id = 0; id < items.size(); ++id) {
      const auto text = items[id].as_string();
      if (!text) continue;
      for (const auto end : k_end_of_turn)
        // gpt-oss's <|end|> closes a message (its reasoning) mid-answer.
        if (*text == end && !(end == "<|end|>" && c.family() == model_family::gpt_oss))
          add_eos(static_cast<token_id>(id));
    }
  }
}

/// Phi-3's longrope factors, or the rope_freqs tensor's.
void read_rope_factors(const gguf::file& f, const hparams& h, model_config& c, std::string_view scaling) {
  const auto fam = c.family();
  auto& rs = c.rope_scaling;
  // Phi-3's longrope: older converters write its factor tensors without
  // the scaling key.
  const bool longrope = scaling == "longrope" || (fam == model_family::phi3 && f.find_tensor("rope_factors_long.weight"));
  if (longrope && fam != model_family::phi3)
    fail(f.path(), "key '" + h.key("rope.scaling.type") + "' is 'longrope', which troupe implements for phi3 only");
  const auto half = c.head_dim / 2;
  if (longrope) {
    rs.type = "longrope";
    rs.original_max_position_embeddings = h.size("rope.scaling.original_context_length");
    rs.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(rs.original_max_position_embeddings);
    rs.attention_factor = h.number_or("rope.scaling.attn_factor", 0.0);
    rs.short_factor = factor_values(f, "rope_factors_short.weight", half);
    rs.long_factor = factor_values(f, "rope_factors_long.weight", half);
  }
  if (f.find_tensor("rope_freqs.weight") != nullptr) {
    if (!rs.type.empty())
      fail(f.path(), "tensor 'rope_freqs.weight' together with rope scaling '" + rs.type + "' is not implemented");
    rs.type = "freq_factors";
    rs.short_factor = factor_values(f, "rope_freqs.weight", half);
  }
}

} // namespace

auto gguf_model_config(const gguf::file& f) -> model_config {
  const auto arch_name = f.require_string("general.architecture");
  const auto& arch = architecture_of(f, arch_name);
  const hparams h(f, arch_name);
  check_known_keys(f, arch_name);

  model_config c;
  c.architecture = arch.hf_name;
  read_dimensions(f, h, c);
  read_experts(f, h, arch_name, c);
  const auto scaling = read_rope_scaling(f, h, c);
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  read_gemma_fields(f, h, c);
  read_special_tokens(f, c);

  const auto* embed = f.find_tensor("token_embd.weight");
  if (embed == nullptr) fail(f.path(), "missing tensor 'token_embd.weight'");
  if (embed->ne.size() != 2) fail(f.path(), "tensor 'token_embd.weight' is not a matrix");
  c.vocab_size = embed->ne[1];
  // llama.cpp computes in F32 whatever the weights' type (Gemma's embedding
  // scale included, unrounded).
  c.torch_dtype = "float32";
  read_rope_factors(f, h, c, scaling);
  c.validate(f.path().string());
  return c;
}


} // namespace troupe
