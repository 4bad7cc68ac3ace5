#include "tests/reference/hf_forward.hpp"

#include "engine/model/model_config.hpp"
#include "engine/formats/safetensors.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace troupe::reference {
namespace {

using vec = std::vector<double>;
using std::size_t;

auto idx(std::int64_t i) -> size_t { return static_cast<size_t>(i); }

/// The checkpoint's tensors by HF name, as doubles.
class checkpoint {
public:
  explicit checkpoint(const std::filesystem::path& dir) : file_(safetensors_file::open(dir / "model.safetensors")) {}

  auto has(const std::string& name) const -> bool { return file_->find(name) != nullptr; }

  auto tensor(const std::string& name) const -> const tensor_info& {
    const auto* t = file_->find(name);
    if (t == nullptr) throw std::runtime_error("reference: missing tensor " + name);
    return *t;
  }
  auto at(const tensor_info& t, std::int64_t i) const -> double { return load_as_f32(t.type, t.data, idx(i)); }

  /// y = W x for rows [first, first + count) of W (all rows when count < 0).
  auto matvec(const std::string& name, const vec& x, std::int64_t first = 0, std::int64_t count = -1) const -> vec {
    const auto& t = tensor(name);
    const std::int64_t cols = t.shape[1];
    if (count < 0) count = t.shape[0];
    vec y(idx(count), 0.0);
    for (std::int64_t r = 0; r < count; ++r) {
      double s = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) s += at(t, (first + r) * cols + c) * x[idx(c)];
      y[idx(r)] = s;
    }
    return y;
  }

  auto vector(const std::string& name) const -> vec {
    const auto& t = tensor(name);
    vec v(idx(t.numel()));
    for (std::int64_t i = 0; i < t.numel(); ++i) v[idx(i)] = at(t, i);
    return v;
  }

private:
  std::shared_ptr<const safetensors_file> file_;
};

// LlamaRMSNorm: x / sqrt(mean(x²) + eps) · w; GemmaRMSNorm: · (1 + w).
auto rms_norm(const vec& x, const vec& w, double eps, bool gemma) -> vec {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * (gemma ? 1.0 + w[i] : w[i]);
  return y;
}

/// inv_freq and attention_factor of modeling_rope_utils.py for a sequence
/// of length seq_len (only dynamic and longrope look at it).
struct rope_params {
  vec inv_freq;
  double attention_factor = 1.0;
};

auto default_inv_freq(double base, std::int64_t dim) -> vec {
  vec f(idx(dim / 2));
  for (std::int64_t i = 0; i < dim / 2; ++i)
    f[idx(i)] = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
  return f;
}

auto rope_at(const model_config& c, double base, bool scaled, std::int64_t seq_len) -> rope_params {
  const std::int64_t dim = c.head_dim;
  rope_params p{default_inv_freq(base, dim), 1.0};
  const auto& s = c.rope_scaling;
  if (!scaled || s.type.empty()) return p;
  if (s.type == "linear") {
    for (auto& f : p.inv_freq) f /= s.factor;
  } else if (s.type == "llama3") {
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
    for (auto& f : p.inv_freq) {
      const double wavelen = 2 * std::numbers::pi / f;
      const double scaled_f = wavelen > low_wavelen ? f / s.factor : f;
      const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? (1 - smooth) * scaled_f / s.factor + smooth * scaled_f : scaled_f;
    }
  } else if (s.type == "dynamic") {
    const double max_pos = static_cast<double>(c.max_position_embeddings);
    const double len = std::max(static_cast<double>(seq_len), max_pos);
    const double b = base * std::pow(s.factor * len / max_pos - (s.factor - 1),
                                     static_cast<double>(dim) / static_cast<double>(dim - 2));
    p.inv_freq = default_inv_freq(b, dim);
  } else if (s.type == "yarn") {
    p.attention_factor = s.attention_factor > 0 ? s.attention_factor : s.factor <= 1 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;
    const double orig = static_cast<double>(s.original_max_position_embeddings);
    const auto correction_dim = [&](double num_rotations) {
      return (static_cast<double>(dim) * std::log(orig / (num_rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
    };
    // find_correction_range: floor/ceil when truncate (the default).
    const double fast = correction_dim(s.beta_fast), slow = correction_dim(s.beta_slow);
    const double low = std::max(s.truncate ? std::floor(fast) : fast, 0.0);
    double high = std::min(s.truncate ? std::ceil(slow) : slow, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (std::int64_t i = 0; i < dim / 2; ++i) {
      const double pos_freq = std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
      const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (s.factor * pos_freq);
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation_factor = 1 - ramp;
      p.inv_freq[idx(i)] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
  } else if (s.type == "longrope") {
    const double orig = static_cast<double>(s.original_max_position_embeddings);
    p.attention_factor = s.attention_factor > 0 ? s.attention_factor
                         : s.factor <= 1        ? 1.0
                                                : std::sqrt(1 + std::log(s.factor) / std::log(orig));
    const auto& ext = seq_len > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
    for (std::int64_t i = 0; i < dim / 2; ++i)
      p.inv_freq[idx(i)] = 1.0 / (ext[idx(i)] * std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim)));
  } else {
    throw std::runtime_error("reference: rope type " + s.type);
  }
  return p;
}

// apply_rotary_pos_emb with rotate_half, cos/sin scaled by attention_factor.
void rotate(vec& x, std::int64_t heads, std::int64_t hd, std::int64_t pos, const rope_params& p) {
  const std::int64_t half = hd / 2;
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * p.inv_freq[idx(i)];
      const double cs = std::cos(a) * p.attention_factor, sn = std::sin(a) * p.attention_factor;
      const double x1 = x[idx(h * hd + i)], x2 = x[idx(h * hd + i + half)];
      x[idx(h * hd + i)] = x1 * cs - x2 * sn;
      x[idx(h * hd + i + half)] = x2 * cs + x1 * sn;
    }
}

auto gelu_tanh(double x) -> double {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
auto silu(double x) -> double { return x / (1.0 + std::exp(-x)); }

// W_e x for expert e of an MXFP4 tensor as transformers' convert_moe_packed_tensors
// reads it: name_blocks [experts, rows, cols / 32, 16] (low nibble: the even
// element), name_scales [experts, rows, cols / 32] (2^(scale - 127)).
auto mxfp4_matvec(const checkpoint& ck, const std::string& name, std::int64_t e, const vec& x) -> vec {
  static constexpr double fp4[16] = {+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0,
                                     -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
  const auto& blocks = ck.tensor(name + "_blocks");
  const auto& scales = ck.tensor(name + "_scales");
  const std::int64_t rows = blocks.shape[1], nb = blocks.shape[2];
  const auto* b = reinterpret_cast<const std::uint8_t*>(blocks.data);
  const auto* sc = reinterpret_cast<const std::uint8_t*>(scales.data);
  vec y(idx(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < nb; ++k) {
      const auto block = (e * rows + r) * nb + k;
      const double scale = std::ldexp(1.0, static_cast<int>(sc[block]) - 127);
      for (int j = 0; j < 16; ++j) {
        const std::uint8_t byte = b[block * 16 + j];
        y[idx(r)] += fp4[byte & 0x0F] * scale * x[idx(k * 32 + 2 * j)] + fp4[byte >> 4] * scale * x[idx(k * 32 + 2 * j + 1)];
      }
    }
  return y;
}

// GptOssMLP: router_logits = router(x) (with its bias); the top k logits,
// softmax over those k; each expert's gate_up_proj (interleaved: gate the
// even outputs, up the odd) with its bias, gate clamped above and up on both
// sides at swiglu_limit, (up + 1) · gate · σ(1.702 · gate), down_proj with
// its bias, weighted.
auto gpt_oss_moe(const checkpoint& ck, const model_config& c, const std::string& layer, const vec& x) -> vec {
  const auto base = layer + "mlp.";
  auto logits = ck.matvec(base + "router.weight", x);
  const auto rb = ck.vector(base + "router.bias");
  for (size_t i = 0; i < logits.size(); ++i) logits[i] += rb[i];
  std::vector<std::int64_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return logits[idx(a)] > logits[idx(b)]; });
  order.resize(idx(c.num_experts_per_tok));
  const double mx = logits[idx(order[0])];
  double z = 0.0;
  for (const auto e : order) z += std::exp(logits[idx(e)] - mx);
  const auto& gub = ck.tensor(base + "experts.gate_up_proj_bias");
  const auto& db = ck.tensor(base + "experts.down_proj_bias");
  const std::int64_t inter = c.moe_intermediate_size, d = c.hidden_size;
  const double limit = c.swiglu_limit;
  vec out(x.size(), 0.0);
  for (const auto e : order) {
    const auto gate_up = mxfp4_matvec(ck, base + "experts.gate_up_proj", e, x);
    vec h(idx(inter));
    for (std::int64_t i = 0; i < inter; ++i) {
      const double gate = std::min(gate_up[idx(2 * i)] + ck.at(gub, e * 2 * inter + 2 * i), limit);
      const double up = std::clamp(gate_up[idx(2 * i + 1)] + ck.at(gub, e * 2 * inter + 2 * i + 1), -limit, limit);
      h[idx(i)] = (up + 1.0) * gate / (1.0 + std::exp(-1.702 * gate));
    }
    const auto y = mxfp4_matvec(ck, base + "experts.down_proj", e, h);
    const double w = std::exp(logits[idx(e)] - mx) / z;
    for (std::int64_t i = 0; i < d; ++i) out[idx(i)] += w * (y[idx(i)] + ck.at(db, e * d + i));
  }
  return out;
}

// Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock and OlmoeSparseMoeBlock:
// routing_weights = softmax(gate(x)); the top k of them, divided by their
// sum where norm_topk_prob (Mixtral: always); the chosen experts' SwiGLU
// MLPs summed with those weights.
auto sparse_moe(const checkpoint& ck, const model_config& c, const std::string& layer, const vec& x) -> vec {
  const bool mixtral = c.architecture == "MixtralForCausalLM";
  const auto base = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  auto p = ck.matvec(base + "gate.weight", x);
  const double mx = *std::max_element(p.begin(), p.end());
  double z = 0.0;
  for (auto& e : p) z += (e = std::exp(e - mx));
  for (auto& e : p) e /= z;
  std::vector<std::int64_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return p[idx(a)] > p[idx(b)]; });
  order.resize(idx(c.num_experts_per_tok));
  double total = 0.0;
  for (const auto e : order) total += p[idx(e)];
  vec out(x.size(), 0.0);
  for (const auto e : order) {
    const auto ex = base + "experts." + std::to_string(e) + ".";
    auto gate = ck.matvec(ex + (mixtral ? "w1.weight" : "gate_proj.weight"), x);
    const auto up = ck.matvec(ex + (mixtral ? "w3.weight" : "up_proj.weight"), x);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = silu(gate[i]) * up[i];
    const auto y = ck.matvec(ex + (mixtral ? "w2.weight" : "down_proj.weight"), gate);
    const double w = (mixtral || c.norm_topk_prob) ? p[idx(e)] / total : p[idx(e)];
    for (size_t i = 0; i < out.size(); ++i) out[i] += w * y[i];
  }
  return out;
}

// The layer's MLP on x: LlamaMLP (Phi-3's gate_up_proj split in two;
// Gemma's GeGLU and post-norm), or a sparse MoE block.
auto mlp(const checkpoint& ck, const model_config& c, const std::string& p, const vec& x) -> vec {
  const auto fam = c.family();
  if (c.num_experts > 0) return fam == model_family::gpt_oss ? gpt_oss_moe(ck, c, p, x) : sparse_moe(ck, c, p, x);
  const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
  const std::int64_t inter = c.intermediate_size;
  vec gate, up;
  if (fam == model_family::phi3) { // gate, up_states = gate_up_proj(x).chunk(2)
    gate = ck.matvec(p + "mlp.gate_up_proj.weight", x, 0, inter);
    up = ck.matvec(p + "mlp.gate_up_proj.weight", x, inter, inter);
  } else {
    gate = ck.matvec(p + "mlp.gate_proj.weight", x);
    up = ck.matvec(p + "mlp.up_proj.weight", x);
  }
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = (gemma ? gelu_tanh(gate[i]) : silu(gate[i])) * up[i];
  auto down = ck.matvec(p + "mlp.down_proj.weight", gate);
  if (gemma) down = rms_norm(down, ck.vector(p + "post_feedforward_layernorm.weight"), c.rms_norm_eps, true);
  return down;
}

} // namespace

auto hf_forward(const std::filesystem::path& dir, std::span<const token_id> tokens) -> std::vector<double> {
  const auto c = model_config::load(dir);
  const checkpoint ck(dir);
  const auto fam = c.family();
  const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
  const bool phi3 = fam == model_family::phi3;
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t d = c.hidden_size, hd = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const double eps = c.rms_norm_eps;

  // Embeddings; Gemma multiplies by normalizer = tensor(hidden ** 0.5, dtype=hidden_states.dtype).
  const auto& embed = ck.tensor("model.embed_tokens.weight");
  double normalizer = 1.0;
  if (gemma) {
    const auto s = static_cast<float>(std::sqrt(static_cast<double>(d)));
    normalizer = embed.type == dtype::bf16 ? bf16_to_f32(f32_to_bf16(s))
                 : embed.type == dtype::f16 ? f16_to_f32(f32_to_f16(s))
                                            : s;
  }
  std::vector<vec> h(idx(n), vec(idx(d)));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i) h[idx(t)][idx(i)] = ck.at(embed, tokens[idx(t)] * d + i) * normalizer;

  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const bool sliding = c.sliding_window > 0 && (c.sliding_layers.empty() || c.sliding_layers[idx(l)]);
    // Gemma 3: sliding layers rotate with rope_local_base_freq, unscaled.
    const bool local_rope = fam == model_family::gemma3 && sliding;
    const double base = local_rope ? c.rope_local_base_freq : c.rope_theta;

    std::vector<vec> q(idx(n)), k(idx(n)), v(idx(n));
    for (std::int64_t t = 0; t < n; ++t) {
      const auto x = rms_norm(h[idx(t)], ck.vector(p + "input_layernorm.weight"), eps, gemma);
      if (phi3) {
        const std::string w = p + "self_attn.qkv_proj.weight";
        q[idx(t)] = ck.matvec(w, x, 0, nh * hd);
        k[idx(t)] = ck.matvec(w, x, nh * hd, nkv * hd);
        v[idx(t)] = ck.matvec(w, x, nh * hd + nkv * hd, nkv * hd);
      } else {
        q[idx(t)] = ck.matvec(p + "self_attn.q_proj.weight", x);
        k[idx(t)] = ck.matvec(p + "self_attn.k_proj.weight", x);
        v[idx(t)] = ck.matvec(p + "self_attn.v_proj.weight", x);
      }
      if (fam == model_family::qwen2 || fam == model_family::gpt_oss) { // q/k/v_proj with bias=True
        for (const auto& [name, y] : {std::pair{"q", &q[idx(t)]}, std::pair{"k", &k[idx(t)]}, std::pair{"v", &v[idx(t)]}}) {
          const auto b = ck.vector(p + "self_attn." + name + "_proj.bias");
          for (size_t i = 0; i < b.size(); ++i) (*y)[i] += b[i];
        }
      }
      if (fam == model_family::qwen3 || fam == model_family::gemma3) { // q_norm/k_norm over head_dim
        const auto qn = ck.vector(p + "self_attn.q_norm.weight"), kn = ck.vector(p + "self_attn.k_norm.weight");
        for (auto [y, heads, w] : {std::tuple{&q[idx(t)], nh, &qn}, std::tuple{&k[idx(t)], nkv, &kn}})
          for (std::int64_t hh = 0; hh < heads; ++hh) {
            const vec head(y->begin() + hh * hd, y->begin() + (hh + 1) * hd);
            const auto normed = rms_norm(head, *w, eps, gemma);
            std::copy(normed.begin(), normed.end(), y->begin() + hh * hd);
          }
      }
      if (fam == model_family::olmoe) { // OlmoeAttention: q_norm(q_proj(x)), k_norm(k_proj(x)), whole width
        q[idx(t)] = rms_norm(q[idx(t)], ck.vector(p + "self_attn.q_norm.weight"), eps, false);
        k[idx(t)] = rms_norm(k[idx(t)], ck.vector(p + "self_attn.k_norm.weight"), eps, false);
      }
      const auto rp = rope_at(c, base, !local_rope, t + 1);
      rotate(q[idx(t)], nh, hd, t, rp);
      rotate(k[idx(t)], nkv, hd, t, rp);
    }
    const double scaling = gemma ? 1.0 / std::sqrt(c.query_pre_attn_scalar) : 1.0 / std::sqrt(static_cast<double>(hd));
    for (std::int64_t t = 0; t < n; ++t) {
      vec attn(idx(nh * hd), 0.0);
      // Causal, and with a window W: kv_idx > q_idx - W.
      const std::int64_t first = sliding ? std::max<std::int64_t>(0, t - c.sliding_window + 1) : 0;
      for (std::int64_t head = 0; head < nh; ++head) {
        const std::int64_t kvh = head / (nh / nkv); // repeat_kv
        vec s(idx(t + 1 - first));
        for (std::int64_t j = first; j <= t; ++j) {
          double dot = 0.0;
          for (std::int64_t i = 0; i < hd; ++i) dot += q[idx(t)][idx(head * hd + i)] * k[idx(j)][idx(kvh * hd + i)];
          dot *= scaling;
          if (c.attn_logit_softcapping > 0) dot = std::tanh(dot / c.attn_logit_softcapping) * c.attn_logit_softcapping;
          s[idx(j - first)] = dot;
        }
        // gpt-oss (eager_attention_forward): the head's sink joins the
        // softmax as one more logit, its probability then dropped.
        const bool sink = fam == model_family::gpt_oss;
        const double sink_logit = sink ? ck.at(ck.tensor(p + "self_attn.sinks"), head) : 0.0;
        const double mx = std::max(*std::max_element(s.begin(), s.end()), sink ? sink_logit : -INFINITY);
        double z = sink ? std::exp(sink_logit - mx) : 0.0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (std::int64_t j = first; j <= t; ++j)
          for (std::int64_t i = 0; i < hd; ++i)
            attn[idx(head * hd + i)] += s[idx(j - first)] / z * v[idx(j)][idx(kvh * hd + i)];
      }
      auto o = ck.matvec(p + "self_attn.o_proj.weight", attn);
      if (fam == model_family::gpt_oss) {
        const auto ob = ck.vector(p + "self_attn.o_proj.bias");
        for (size_t i = 0; i < o.size(); ++i) o[i] += ob[i];
      }
      if (gemma) o = rms_norm(o, ck.vector(p + "post_attention_layernorm.weight"), eps, true);
      for (std::int64_t i = 0; i < d; ++i) h[idx(t)][idx(i)] += o[idx(i)];
    }
    for (std::int64_t t = 0; t < n; ++t) {
      auto& ht = h[idx(t)];
      const auto x = rms_norm(ht, ck.vector(p + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight")),
                              eps, gemma);
      const auto y = mlp(ck, c, p, x);
      for (std::int64_t i = 0; i < d; ++i) ht[idx(i)] += y[idx(i)];
    }
  }

  const auto final_norm = ck.vector("model.norm.weight");
  const std::string head = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  std::vector<double> logits;
  logits.reserve(idx(n * c.vocab_size));
  for (std::int64_t t = 0; t < n; ++t) {
    auto y = ck.matvec(head, rms_norm(h[idx(t)], final_norm, eps, gemma));
    if (c.final_logit_softcapping > 0)
      for (auto& e : y) e = std::tanh(e / c.final_logit_softcapping) * c.final_logit_softcapping;
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

} // namespace troupe::reference
