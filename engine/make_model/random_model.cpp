#include "engine/make_model/random_model.hpp"

#include "engine/formats/mxfp4.hpp"
#include "engine/formats/safetensors.hpp"
#include "base/rng.hpp"

#include <cmath>
#include <cstring>
#include <tuple>

namespace troupe {
namespace {

// gpt-oss's router and its experts as its official checkpoints hold them:
// MXFP4 blocks and scales (U8, listed apart so the float tensors stay
// aligned), gate and up interleaved, and the biases.
void gpt_oss_expert_specs(const model_config& c, dtype t, const std::string& layer, std::vector<tensor_spec>& s,
                          std::vector<tensor_spec>& bytes) {
  const std::int64_t d = c.hidden_size, inter = c.moe_intermediate_size, n = c.num_experts;
  const auto p = layer + "mlp.";
  s.push_back({p + "router.weight", t, {n, d}});
  s.push_back({p + "router.bias", t, {n}});
  s.push_back({p + "experts.gate_up_proj_bias", t, {n, 2 * inter}});
  s.push_back({p + "experts.down_proj_bias", t, {n, d}});
  for (const auto& [name, rows, cols] : {std::tuple{"gate_up_proj", 2 * inter, d}, std::tuple{"down_proj", d, inter}}) {
    bytes.push_back({p + "experts." + name + "_blocks", dtype::u8, {n, rows, cols / 32, 16}});
    bytes.push_back({p + "experts." + name + "_scales", dtype::u8, {n, rows, cols / 32}});
  }
}

// A mixture of experts' router and experts (model_weights' load_experts).
void expert_specs(const model_config& c, dtype t, const std::string& layer, std::vector<tensor_spec>& s) {
  const bool mixtral = c.architecture == "MixtralForCausalLM";
  const auto base = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  const std::int64_t d = c.hidden_size, inter = c.moe_intermediate_size;
  s.push_back({base + "gate.weight", t, {c.num_experts, d}});
  for (std::int64_t x = 0; x < c.num_experts; ++x) {
    const auto p = base + "experts." + std::to_string(x) + ".";
    s.push_back({p + (mixtral ? "w1.weight" : "gate_proj.weight"), t, {inter, d}});
    s.push_back({p + (mixtral ? "w3.weight" : "up_proj.weight"), t, {inter, d}});
    s.push_back({p + (mixtral ? "w2.weight" : "down_proj.weight"), t, {d, inter}});
  }
}

// Every tensor of the family's checkpoint, by its HF name.
auto specs_of(const model_config& c, dtype t) -> std::vector<tensor_spec> {
  const std::int64_t d = c.hidden_size, q = c.num_attention_heads * c.head_dim;
  const std::int64_t kv = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;
  const auto fam = c.family();
  const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
  std::vector<tensor_spec> s, bytes;
  s.push_back({"model.embed_tokens.weight", t, {c.vocab_size, d}});
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s.push_back({p + "input_layernorm.weight", t, {d}});
    if (fam == model_family::phi3) {
      s.push_back({p + "self_attn.qkv_proj.weight", t, {q + 2 * kv, d}});
    } else {
      s.push_back({p + "self_attn.q_proj.weight", t, {q, d}});
      s.push_back({p + "self_attn.k_proj.weight", t, {kv, d}});
      s.push_back({p + "self_attn.v_proj.weight", t, {kv, d}});
    }
    if (fam == model_family::qwen2 || fam == model_family::gpt_oss) {
      s.push_back({p + "self_attn.q_proj.bias", t, {q}});
      s.push_back({p + "self_attn.k_proj.bias", t, {kv}});
      s.push_back({p + "self_attn.v_proj.bias", t, {kv}});
    }
    if (fam == model_family::qwen3 || fam == model_family::gemma3) {
      s.push_back({p + "self_attn.q_norm.weight", t, {c.head_dim}});
      s.push_back({p + "self_attn.k_norm.weight", t, {c.head_dim}});
    } else if (fam == model_family::olmoe) {
      s.push_back({p + "self_attn.q_norm.weight", t, {q}});
      s.push_back({p + "self_attn.k_norm.weight", t, {kv}});
    }
    s.push_back({p + "self_attn.o_proj.weight", t, {d, q}});
    if (fam == model_family::gpt_oss) {
      s.push_back({p + "self_attn.o_proj.bias", t, {d}});
      s.push_back({p + "self_attn.sinks", t, {c.num_attention_heads}});
    }
    s.push_back({p + "post_attention_layernorm.weight", t, {d}});
    if (gemma) {
      s.push_back({p + "pre_feedforward_layernorm.weight", t, {d}});
      s.push_back({p + "post_feedforward_layernorm.weight", t, {d}});
    }
    if (fam == model_family::gpt_oss) {
      gpt_oss_expert_specs(c, t, p, s, bytes);
    } else if (c.is_moe()) {
      expert_specs(c, t, p, s);
    } else if (fam == model_family::phi3) {
      s.push_back({p + "mlp.gate_up_proj.weight", t, {2 * inter, d}});
    } else {
      s.push_back({p + "mlp.gate_proj.weight", t, {inter, d}});
      s.push_back({p + "mlp.up_proj.weight", t, {inter, d}});
    }
    if (!c.is_moe()) s.push_back({p + "mlp.down_proj.weight", t, {d, inter}});
  }
  s.push_back({"model.norm.weight", t, {d}});
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", t, {c.vocab_size, d}});
  s.insert(s.end(), bytes.begin(), bytes.end());
  return s;
}

// FNV-1a: a seed per tensor name that is the same on every platform.
auto name_hash(const std::string& s) -> std::uint64_t {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Emits a tensor's values in bounded pieces, converted to the file's dtype.
// Gemma stores a norm's scale as w with 1 + w applied, so its norms centre
// on 0 (gemma_norms); biases centre on 0 too.
void emit(const tensor_spec& spec, const random_model_options& o, std::uint64_t seed, bool gemma_norms,
          safetensors_writer& out) {
  std::int64_t n = 1;
  for (auto x : spec.shape) n *= x;
  const bool is_bias = spec.name.ends_with(".bias");
  const bool is_norm = spec.shape.size() == 1 && !is_bias;
  const double centre = is_norm && !gemma_norms ? 1.0 : 0.0;
  const double cols = static_cast<double>(spec.shape.back());
  double scale = is_norm ? 0.1 : is_bias ? 0.5 : 1.0 / std::sqrt(cols);
  if (spec.name.ends_with("o_proj.weight") || spec.name.ends_with("down_proj.weight") || spec.name.ends_with("w2.weight"))
    scale *= o.residual_scale;
  const auto fixed = o.fixed.find(spec.name);
  rng r(seed);
  constexpr std::int64_t piece = 1 << 20;
  std::vector<std::byte> buf(static_cast<std::size_t>(piece) * dtype_size(spec.type));
  for (std::int64_t begin = 0; begin < n; begin += piece) {
    const std::int64_t m = std::min(piece, n - begin);
    for (std::int64_t i = 0; i < m; ++i) {
      float v;
      if (fixed != o.fixed.end())
        v = fixed->second.at(static_cast<std::size_t>(begin + i));
      else
        v = static_cast<float>(centre + scale * r.normal());
      auto* dst = buf.data() + static_cast<std::size_t>(i) * dtype_size(spec.type);
      if (spec.type == dtype::f32) {
        std::memcpy(dst, &v, 4);
      } else {
        const std::uint16_t h = spec.type == dtype::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(dst, &h, 2);
      }
    }
    out.write(std::span(buf).first(static_cast<std::size_t>(m) * dtype_size(spec.type)));
  }
}

// An MXFP4 tensor's blocks or scales (Hugging Face's layout, mxfp4.hpp):
// N(0, 1/cols) rows quantized, both tensors drawn from the base name's seed.
void emit_mxfp4(const tensor_spec& spec, const random_model_options& o, std::uint64_t seed, safetensors_writer& out) {
  const bool blocks = spec.name.ends_with("_blocks");
  const std::int64_t rows = spec.shape[0] * spec.shape[1], nb = spec.shape[2], cols = nb * 32;
  double scale = 1.0 / std::sqrt(static_cast<double>(cols));
  if (spec.name.find("down_proj") != std::string::npos) scale *= o.residual_scale;
  rng r(seed);
  std::vector<float> row(static_cast<std::size_t>(cols));
  std::vector<std::byte> ggml(static_cast<std::size_t>(nb * mxfp4::block_bytes));
  std::vector<std::byte> buf;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (auto& v : row) v = static_cast<float>(scale * r.normal());
    mxfp4::quantize(row.data(), ggml.data(), cols);
    buf.clear();
    for (std::int64_t b = 0; b < nb; ++b) {
      const auto* g = reinterpret_cast<const std::uint8_t*>(ggml.data() + b * mxfp4::block_bytes);
      if (!blocks) {
        buf.push_back(static_cast<std::byte>(g[0]));
        continue;
      }
      // ggml: low nibbles values 0-15, high 16-31; Hugging Face: 2j, 2j + 1.
      std::uint8_t code[32];
      for (int j = 0; j < 16; ++j) code[j] = g[1 + j] & 0x0F, code[16 + j] = g[1 + j] >> 4;
      for (int j = 0; j < 16; ++j) buf.push_back(static_cast<std::byte>(code[2 * j] | (code[2 * j + 1] << 4)));
    }
    out.write(buf);
  }
}

} // namespace

void write_random_model(const std::filesystem::path& dir, const model_config& config,
                        const random_model_options& options) {
  std::filesystem::create_directories(dir);
  config.save(dir);
  auto specs = specs_of(config, options.type);
  safetensors_writer out(dir / "model.safetensors", specs, {{"format", "pt"}});
  const bool gemma = config.family() == model_family::gemma2 || config.family() == model_family::gemma3;
  for (const auto& spec : specs) {
    if (spec.type == dtype::u8) {
      const auto base = spec.name.substr(0, spec.name.rfind('_')); // blocks and scales share a seed
      emit_mxfp4(spec, options, options.seed ^ name_hash(base), out);
    } else {
      emit(spec, options, options.seed ^ name_hash(spec.name), gemma, out);
    }
  }
  out.finish();
}

} // namespace troupe
