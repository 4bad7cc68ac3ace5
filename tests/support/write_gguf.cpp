// write_gguf --type TYPE MODEL_DIR OUT.gguf: a model directory (config.json,
// model.safetensors, tokenizer) as the GGUF file llama.cpp's
// convert_hf_to_gguf.py and llama-quantize would make of it, for the tests
// that load one file in both troupe and llama.cpp. TYPE:
//   f32, f16, bf16    convert's --outtype: matrices in that type, 1-D tensors F32
//   q8_0 q4_0 q4_k q6_k  every matrix in the type (llama-quantize --pure)
//   q4_k_m            llama-quantize's Q4_K_M mix: Q4_K, with Q6_K for the
//                     output (the embeddings when tied) and for attn_v and
//                     ffn_down on the layers its use_more_bits picks
//   mxfp4             gpt-oss: its MXFP4 experts as they are, the rest Q8_0
// Mixtures of experts: 3-D ffn_*_exps tensors, the router in F32.
// The quantizer is troupe's round-to-nearest (gguf::quantize_row), not
// llama-quantize's search: the bytes differ, the format is the same.

#include "engine/formats/gguf.hpp"
#include "engine/formats/gguf_quant.hpp"
#include "engine/formats/mxfp4.hpp"
#include "engine/model/model_config.hpp"
#include "engine/formats/safetensors.hpp"
#include "tests/support/gguf_vocab.hpp"
#include "tests/support/gguf_writer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

namespace fs = std::filesystem;
using troupe::model_config;
using troupe::model_family;
using troupe::gguf::tensor_type;
using troupe::testing::gguf_writer;

namespace {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct file_kind {
  std::string_view name;
  tensor_type matrix;        ///< the type of a matrix, before the Q4_K_M mix
  std::uint32_t file_type;   ///< general.file_type: llama.cpp's llama_ftype
};

constexpr file_kind kinds[] = {
    {"f32", tensor_type::f32, 0},   {"f16", tensor_type::f16, 1},   {"q8_0", tensor_type::q8_0, 7},
    {"q4_0", tensor_type::q4_0, 2}, {"q4_k", tensor_type::q4_k, 14}, {"q6_k", tensor_type::q6_k, 18},
    {"q4_k_m", tensor_type::q4_k, 15}, {"bf16", tensor_type::bf16, 32},
    // llama-quantize's MXFP4_MOE: experts MXFP4 (gpt-oss's own blocks), other matrices Q8_0.
    {"mxfp4", tensor_type::q8_0, 38},
};

auto arch_name(const model_config& c) -> std::string_view {
  if (c.architecture == "Qwen3MoeForCausalLM") return "qwen3moe";
  switch (c.family()) {
    case model_family::llama: return "llama";
    case model_family::qwen2: return "qwen2";
    case model_family::qwen3: return "qwen3";
    case model_family::gemma2: return "gemma2";
    case model_family::gemma3: return "gemma3";
    case model_family::phi3: return "phi3";
    case model_family::olmoe: return "olmoe";
    case model_family::gpt_oss: return "gpt-oss";
  }
  throw error("unknown model family");
}

// llama-quantize's use_more_bits: the first and last eighth of the layers and
// every third in between get Q6_K in a Q4_K_M file.
auto use_more_bits(std::int64_t layer, std::int64_t num_layers) -> bool {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

class converter {
public:
  converter(const fs::path& dir, const file_kind& kind)
      : dir_(dir), kind_(kind), c_(model_config::load(dir)),
        weights_(troupe::safetensors_file::open(dir / "model.safetensors")), arch_(arch_name(c_)) {}

  void write(const fs::path& out) {
    metadata();
    troupe::testing::write_tokenizer_metadata(w_, dir_);
    tensors();
    w_.write(out);
  }

private:
  auto key(std::string_view suffix) const -> std::string { return std::string(arch_) + "." + std::string(suffix); }
  auto rope_dims() const -> std::int64_t { return c_.head_dim; }

  void metadata() {
    w_.kv_string("general.architecture", arch_);
    w_.kv_string("general.name", dir_.filename().string());
    w_.kv_u32("general.file_type", kind_.file_type);
    if (kind_.file_type > 1) w_.kv_u32("general.quantization_version", 2);
    w_.kv_u32(key("vocab_size"), static_cast<std::uint32_t>(c_.vocab_size));
    w_.kv_u32(key("context_length"), static_cast<std::uint32_t>(c_.max_position_embeddings));
    w_.kv_u32(key("embedding_length"), static_cast<std::uint32_t>(c_.hidden_size));
    w_.kv_u32(key("block_count"), static_cast<std::uint32_t>(c_.num_hidden_layers));
    w_.kv_u32(key("feed_forward_length"), static_cast<std::uint32_t>(c_.intermediate_size));
    w_.kv_u32(key("attention.head_count"), static_cast<std::uint32_t>(c_.num_attention_heads));
    w_.kv_u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(c_.num_key_value_heads));
    w_.kv_u32(key("attention.key_length"), static_cast<std::uint32_t>(c_.head_dim));
    w_.kv_u32(key("attention.value_length"), static_cast<std::uint32_t>(c_.head_dim));
    w_.kv_u32(key("rope.dimension_count"), static_cast<std::uint32_t>(rope_dims()));
    w_.kv_f32(key("rope.freq_base"), static_cast<float>(c_.rope_theta));
    w_.kv_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c_.rms_norm_eps));
    const auto fam = c_.family();
    if (fam == model_family::gemma2 || fam == model_family::gemma3 || fam == model_family::phi3 ||
        fam == model_family::gpt_oss)
      w_.kv_u32(key("attention.sliding_window"), static_cast<std::uint32_t>(c_.sliding_window));
    else if (c_.sliding_window > 0)
      throw error("a sliding window on " + std::string(arch_) + " has no GGUF key llama.cpp reads");
    if (c_.is_moe()) expert_metadata();
    if (fam == model_family::gemma2) {
      w_.kv_f32(key("attn_logit_softcapping"), static_cast<float>(c_.attn_logit_softcapping));
      w_.kv_f32(key("final_logit_softcapping"), static_cast<float>(c_.final_logit_softcapping));
    }
    const auto& rs = c_.rope_scaling;
    if (rs.type == "linear") {
      w_.kv_string(key("rope.scaling.type"), "linear");
      w_.kv_f32(key("rope.scaling.factor"), static_cast<float>(rs.factor));
    } else if (rs.type == "longrope") {
      // Phi-3: convert's attention factor from the context extension.
      const double scale = static_cast<double>(c_.max_position_embeddings) /
                           static_cast<double>(rs.original_max_position_embeddings);
      const double attn = scale <= 1.0 ? 1.0
                                       : std::sqrt(1.0 + std::log(scale) /
                                                             std::log(static_cast<double>(
                                                                 rs.original_max_position_embeddings)));
      w_.kv_u32(key("rope.scaling.original_context_length"),
                static_cast<std::uint32_t>(rs.original_max_position_embeddings));
      w_.kv_f32(key("rope.scaling.attn_factor"), static_cast<float>(attn));
    } else if (rs.type == "yarn") {
      // llama.cpp rounds YaRN's correction range outwards whatever
      // transformers' truncate says (gpt-oss's is false), as its converter.
      w_.kv_string(key("rope.scaling.type"), "yarn");
      w_.kv_f32(key("rope.scaling.factor"), static_cast<float>(rs.factor));
      w_.kv_u32(key("rope.scaling.original_context_length"),
                static_cast<std::uint32_t>(rs.original_max_position_embeddings));
    } else if (!rs.type.empty() && rs.type != "llama3") {
      throw error("rope_scaling '" + rs.type + "' is not written by this tool");
    }
  }

  // The experts' keys; llama.cpp renormalises qwen3moe's and Mixtral's
  // chosen experts' weights and never olmoe's, whatever the config says.
  void expert_metadata() {
    w_.kv_u32(key("expert_count"), static_cast<std::uint32_t>(c_.num_experts));
    w_.kv_u32(key("expert_used_count"), static_cast<std::uint32_t>(c_.num_experts_per_tok));
    if (arch_ == "qwen3moe" || arch_ == "gpt-oss")
      w_.kv_u32(key("expert_feed_forward_length"), static_cast<std::uint32_t>(c_.moe_intermediate_size));
    const bool norm = arch_ != "olmoe" && arch_ != "gpt-oss";
    if (c_.norm_topk_prob != norm)
      throw error(std::string(arch_) + ": llama.cpp " + (norm ? "always" : "never") +
                  " renormalises the chosen experts' weights, and this config's norm_topk_prob differs");
  }

  /// A safetensors tensor as F32 values, row-major.
  auto load(const std::string& name) const -> std::vector<float> {
    const auto* t = weights_->find(name);
    if (!t) throw error(weights_->path().string() + ": no tensor " + name);
    std::vector<float> v(static_cast<std::size_t>(t->numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = troupe::load_as_f32(t->type, t->data, i);
    return v;
  }

  // convert's LlamaModel.permute: llama.cpp rotates adjacent pairs (GPT-J
  // style) where Hugging Face rotates the two halves of each head, so within
  // a head the row i * half + j moves to 2 * j + i.
  static auto permute_heads(const std::vector<float>& w, std::int64_t heads, std::int64_t cols) -> std::vector<float> {
    const auto rows = static_cast<std::int64_t>(w.size()) / cols;
    const auto half = rows / heads / 2;
    std::vector<float> out(w.size());
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t j = 0; j < half; ++j) {
          const auto from = (h * 2 * half + i * half + j) * cols;
          const auto to = (h * 2 * half + 2 * j + i) * cols;
          std::copy_n(w.begin() + from, cols, out.begin() + to);
        }
    return out;
  }

  /// The type of a matrix with rows of cols values; layer -1 outside the blocks.
  auto matrix_type(std::string_view gguf_name, std::int64_t layer, std::int64_t cols) const -> tensor_type {
    auto t = kind_.matrix;
    if (kind_.name == "q4_k_m") {
      const bool output = gguf_name == "output.weight" || (gguf_name == "token_embd.weight" && c_.tie_word_embeddings);
      const bool more_bits_kind = gguf_name.ends_with("attn_v.weight") || gguf_name.ends_with("attn_qkv.weight") ||
                                  gguf_name.ends_with("ffn_down.weight") || gguf_name.ends_with("ffn_down_exps.weight");
      if (output || (more_bits_kind && use_more_bits(layer, c_.num_hidden_layers))) t = tensor_type::q6_k;
      // llama-quantize's rules for 8-expert models (Mixtral).
      if (c_.num_experts == 8 && (gguf_name.ends_with("attn_v.weight") || gguf_name.ends_with("attn_k.weight")))
        t = tensor_type::q8_0;
      if (c_.num_experts == 8 && gguf_name.ends_with("attn_output.weight")) t = tensor_type::q5_k;
    }
    const auto block = troupe::gguf::traits(static_cast<std::uint32_t>(t))->block_elements;
    if (cols % block != 0)
      throw error(std::string(gguf_name) + ": rows of " + std::to_string(cols) + " values are not whole " +
                  std::string(troupe::gguf::type_name(t)) + " blocks of " + std::to_string(block) +
                  " (make the model with make-model --small --hidden 256)");
    return t;
  }

  /// Adds a tensor of shape [rows, cols] (cols 0: a vector of rows values),
  /// or with experts > 0 one of [experts, rows / experts, cols]. f32: kept in
  /// F32 whatever the file's type (the router: convert and llama-quantize
  /// never change ffn_gate_inp).
  void add(const std::string& gguf_name, std::vector<float> v, std::int64_t layer, std::int64_t rows,
           std::int64_t cols, std::int64_t experts = 0, bool f32 = false) {
    if (cols == 0) {
      w_.tensor<float>(gguf_name, {static_cast<std::uint64_t>(rows)}, 0, v);
      return;
    }
    const auto t = f32 ? tensor_type::f32 : matrix_type(gguf_name, layer, cols);
    const auto tr = *troupe::gguf::traits(static_cast<std::uint32_t>(t));
    const auto row_bytes = static_cast<std::size_t>(cols / tr.block_elements * tr.block_bytes);
    std::string bytes(static_cast<std::size_t>(rows) * row_bytes, '\0');
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* x = v.data() + r * cols;
      auto* dst = reinterpret_cast<std::byte*>(bytes.data()) + static_cast<std::size_t>(r) * row_bytes;
      if (t == tensor_type::f32) {
        std::memcpy(dst, x, row_bytes);
      } else if (t == tensor_type::f16 || t == tensor_type::bf16) {
        for (std::int64_t i = 0; i < cols; ++i) {
          const auto h = t == tensor_type::f16 ? troupe::f32_to_f16(x[i]) : troupe::f32_to_bf16(x[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
      } else {
        troupe::gguf::quantize_row(t, x, dst, cols);
      }
    }
    std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows)};
    if (experts > 0) shape = {shape[0], shape[1] / static_cast<std::uint64_t>(experts), static_cast<std::uint64_t>(experts)};
    w_.tensor(gguf_name, shape, static_cast<std::uint32_t>(t), std::move(bytes));
  }

  /// One of gpt-oss's MXFP4 expert tensors (Hugging Face's blocks and
  /// scales; per expert the rows first, first + stride, ...) as ffn_*_exps:
  /// MXFP4 as convert writes it (the same blocks, ggml's nibble order), or
  /// its values in the file's type.
  void mxfp4_experts(const std::string& to, const std::string& from, std::int64_t stored_rows, std::int64_t first,
                     std::int64_t stride, std::int64_t cols, std::int64_t layer) {
    const auto* blocks = raw(from + "_blocks");
    const auto* scales = raw(from + "_scales");
    const auto n = c_.num_experts, rows = stored_rows / stride, nb = cols / 32;
    std::string bytes(static_cast<std::size_t>(n * rows * nb * troupe::mxfp4::block_bytes), '\0');
    for (std::int64_t e = 0; e < n; ++e)
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto src = e * stored_rows + first + r * stride, dst = (e * rows + r) * nb * troupe::mxfp4::block_bytes;
        troupe::mxfp4::from_hf(blocks + src * nb * 16, scales + src * nb,
                               reinterpret_cast<std::byte*>(bytes.data()) + dst, cols);
      }
    if (kind_.name == "mxfp4") {
      w_.tensor(to, {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(n)},
                static_cast<std::uint32_t>(tensor_type::mxfp4), std::move(bytes));
      return;
    }
    std::vector<float> values(static_cast<std::size_t>(n * rows * cols));
    troupe::mxfp4::dequantize(reinterpret_cast<const std::byte*>(bytes.data()), values.data(), n * rows * cols);
    add(to, std::move(values), layer, n * rows, cols, n);
  }

  auto raw(const std::string& name) const -> const std::uint8_t* {
    const auto* t = weights_->find(name);
    if (!t || t->type != troupe::dtype::u8) throw error(weights_->path().string() + ": no U8 tensor " + name);
    return reinterpret_cast<const std::uint8_t*>(t->data);
  }

  /// gpt-oss's router (F32, with its bias) and experts with their biases:
  /// gate_up_proj's interleaved rows split into ffn_gate_exps and ffn_up_exps.
  void gpt_oss_experts(const std::string& p, const std::string& b, std::int64_t l) {
    const auto d = c_.hidden_size, inter = c_.moe_intermediate_size, n = c_.num_experts;
    const auto base = p + "mlp.";
    add(b + "ffn_gate_inp.weight", load(base + "router.weight"), l, n, d, 0, true);
    add(b + "ffn_gate_inp.bias", load(base + "router.bias"), l, n, 0);
    const auto gate_up = load(base + "experts.gate_up_proj_bias");
    for (const auto& [name, offset] : {std::pair{"ffn_gate_exps.bias", 0}, std::pair{"ffn_up_exps.bias", 1}}) {
      std::vector<float> v(static_cast<std::size_t>(n * inter));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = gate_up[2 * i + static_cast<std::size_t>(offset)];
      w_.tensor<float>(b + name, {static_cast<std::uint64_t>(inter), static_cast<std::uint64_t>(n)}, 0, v);
    }
    w_.tensor<float>(b + "ffn_down_exps.bias", {static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(n)}, 0,
                     load(base + "experts.down_proj_bias"));
    mxfp4_experts(b + "ffn_gate_exps.weight", base + "experts.gate_up_proj", 2 * inter, 0, 2, d, l);
    mxfp4_experts(b + "ffn_up_exps.weight", base + "experts.gate_up_proj", 2 * inter, 1, 2, d, l);
    mxfp4_experts(b + "ffn_down_exps.weight", base + "experts.down_proj", d, 0, 1, inter, l);
  }

  /// A mixture of experts' router (F32) and its experts stacked into
  /// ffn_{gate,up,down}_exps, as convert writes them.
  void experts(const std::string& p, const std::string& b, std::int64_t l) {
    const bool mixtral = c_.architecture == "MixtralForCausalLM";
    const auto base = p + (mixtral ? "block_sparse_moe." : "mlp.");
    const auto d = c_.hidden_size, inter = c_.moe_intermediate_size, n = c_.num_experts;
    add(b + "ffn_gate_inp.weight", load(base + "gate.weight"), l, n, d, 0, true);
    const std::pair<const char*, const char*> parts[] = {
        {"ffn_gate_exps.weight", mixtral ? "w1.weight" : "gate_proj.weight"},
        {"ffn_up_exps.weight", mixtral ? "w3.weight" : "up_proj.weight"},
        {"ffn_down_exps.weight", mixtral ? "w2.weight" : "down_proj.weight"}};
    for (const auto& [to, from] : parts) {
      std::vector<float> all;
      for (std::int64_t e = 0; e < n; ++e) {
        const auto v = load(base + "experts." + std::to_string(e) + "." + from);
        all.insert(all.end(), v.begin(), v.end());
      }
      const bool down = std::string_view(to).starts_with("ffn_down");
      add(b + to, std::move(all), l, n * (down ? d : inter), down ? inter : d, n);
    }
  }

  // Llama 3's and Phi-3's RoPE factors, as convert writes them.
  void rope_factor_tensors() {
    if (c_.rope_scaling.type == "llama3") add("rope_freqs.weight", llama3_rope_factors(), -1, c_.head_dim / 2, 0);
    if (c_.rope_scaling.type == "longrope") {
      add("rope_factors_long.weight", as_floats(c_.rope_scaling.long_factor), -1, rope_dims() / 2, 0);
      add("rope_factors_short.weight", as_floats(c_.rope_scaling.short_factor), -1, rope_dims() / 2, 0);
    }
  }

  void tensors() {
    const auto fam = c_.family();
    const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
    const auto d = c_.hidden_size, hd = c_.head_dim, inter = c_.intermediate_size;
    const auto q = c_.num_attention_heads * hd, kv = c_.num_key_value_heads * hd;
    // Gemma's norms scale by (1 + w); llama.cpp's by w, so convert adds the 1.
    const auto norm = [&](const std::string& from, const std::string& to, std::int64_t layer, std::int64_t n) {
      auto v = load(from);
      if (gemma)
        for (auto& x : v) x += 1.0f;
      add(to, std::move(v), layer, n, 0);
    };
    add("token_embd.weight", load("model.embed_tokens.weight"), -1, c_.vocab_size, d);
    rope_factor_tensors();
    for (std::int64_t l = 0; l < c_.num_hidden_layers; ++l) {
      const auto p = "model.layers." + std::to_string(l) + ".";
      const auto b = "blk." + std::to_string(l) + ".";
      norm(p + "input_layernorm.weight", b + "attn_norm.weight", l, d);
      if (fam == model_family::phi3) {
        add(b + "attn_qkv.weight", load(p + "self_attn.qkv_proj.weight"), l, q + 2 * kv, d);
      } else {
        auto wq = load(p + "self_attn.q_proj.weight"), wk = load(p + "self_attn.k_proj.weight");
        if (fam == model_family::llama) {
          wq = permute_heads(wq, c_.num_attention_heads, d);
          wk = permute_heads(wk, c_.num_key_value_heads, d);
        }
        add(b + "attn_q.weight", std::move(wq), l, q, d);
        add(b + "attn_k.weight", std::move(wk), l, kv, d);
        add(b + "attn_v.weight", load(p + "self_attn.v_proj.weight"), l, kv, d);
      }
      if (fam == model_family::qwen2 || fam == model_family::gpt_oss)
        for (const auto* n : {"q", "k", "v"})
          add(b + "attn_" + n + ".bias", load(p + "self_attn." + n + "_proj.bias"), l, n[0] == 'q' ? q : kv, 0);
      if (fam == model_family::qwen3 || fam == model_family::gemma3) {
        norm(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight", l, hd);
        norm(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight", l, hd);
      } else if (fam == model_family::olmoe) {
        norm(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight", l, q);
        norm(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight", l, kv);
      }
      add(b + "attn_output.weight", load(p + "self_attn.o_proj.weight"), l, d, q);
      if (fam == model_family::gpt_oss) {
        add(b + "attn_output.bias", load(p + "self_attn.o_proj.bias"), l, d, 0);
        add(b + "attn_sinks.weight", load(p + "self_attn.sinks"), l, c_.num_attention_heads, 0);
        norm(p + "post_attention_layernorm.weight", b + "post_attention_norm.weight", l, d);
        gpt_oss_experts(p, b, l);
        continue;
      }
      if (gemma) {
        norm(p + "post_attention_layernorm.weight", b + "post_attention_norm.weight", l, d);
        norm(p + "pre_feedforward_layernorm.weight", b + "ffn_norm.weight", l, d);
        norm(p + "post_feedforward_layernorm.weight", b + "post_ffw_norm.weight", l, d);
      } else {
        norm(p + "post_attention_layernorm.weight", b + "ffn_norm.weight", l, d);
      }
      if (c_.is_moe()) {
        experts(p, b, l);
        continue;
      }
      if (fam == model_family::phi3) {
        // llama.cpp's Phi-3 takes gate and up fused in ffn_up, gate first, as Hugging Face stores them.
        add(b + "ffn_up.weight", load(p + "mlp.gate_up_proj.weight"), l, 2 * inter, d);
      } else {
        add(b + "ffn_gate.weight", load(p + "mlp.gate_proj.weight"), l, inter, d);
        add(b + "ffn_up.weight", load(p + "mlp.up_proj.weight"), l, inter, d);
      }
      add(b + "ffn_down.weight", load(p + "mlp.down_proj.weight"), l, d, inter);
    }
    norm("model.norm.weight", "output_norm.weight", -1, d);
    if (!c_.tie_word_embeddings) add("output.weight", load("lm_head.weight"), -1, c_.vocab_size, d);
  }

  static auto as_floats(const std::vector<double>& v) -> std::vector<float> { return {v.begin(), v.end()}; }

  // convert's LlamaModel: Llama 3's frequency scaling as a factor per
  // rotary frequency (rope_freqs.weight) that llama.cpp divides it by.
  auto llama3_rope_factors() const -> std::vector<float> {
    const auto& rs = c_.rope_scaling;
    const auto old_len = static_cast<double>(rs.original_max_position_embeddings);
    const double low_wavelen = old_len / rs.low_freq_factor, high_wavelen = old_len / rs.high_freq_factor;
    std::vector<float> factors;
    for (std::int64_t i = 0; i < c_.head_dim; i += 2) {
      const double freq = 1.0 / std::pow(c_.rope_theta, static_cast<double>(i) / static_cast<double>(c_.head_dim));
      const double wavelen = 2.0 * std::numbers::pi / freq;
      double f = 1.0;
      if (wavelen > low_wavelen) {
        f = rs.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        f = 1.0 / ((1.0 - smooth) / rs.factor + smooth);
      }
      factors.push_back(static_cast<float>(f));
    }
    return factors;
  }

  fs::path dir_;
  const file_kind& kind_;
  model_config c_;
  std::shared_ptr<const troupe::safetensors_file> weights_;
  std::string_view arch_;
  gguf_writer w_;
};

auto usage() -> int {
  std::fprintf(stderr, "usage: write_gguf --type f32|f16|bf16|q8_0|q4_0|q4_k|q6_k|q4_k_m|mxfp4 MODEL_DIR OUT.gguf\n");
  return 2;
}

} // namespace

auto main(int argc, char** argv) -> int {
  if (argc != 5 || std::string_view(argv[1]) != "--type") return usage();
  const file_kind* kind = nullptr;
  for (const auto& k : kinds)
    if (k.name == argv[2]) kind = &k;
  if (!kind) return usage();
  try {
    converter(argv[3], *kind).write(argv[4]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_gguf: %s\n", e.what());
    return 1;
  }
  return 0;
}
