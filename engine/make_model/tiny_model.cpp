#include "engine/make_model/tiny_model.hpp"

#include "engine/model/presets.hpp"
#include "engine/make_model/random_model.hpp"
#include "base/rng.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/make_model/train_tokenizer.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace troupe {
namespace {

namespace fs = std::filesystem;

auto read_file(const fs::path& p) -> std::string {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Licence files wrap lines at ~72 columns and indent; as prose, a run of
// white space is one space, or one newline when it holds a blank line.
auto as_prose(const std::string& text) -> std::string {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) {
      out += text[i++];
      continue;
    }
    int newlines = 0;
    for (; i < text.size() && std::isspace(static_cast<unsigned char>(text[i])); ++i)
      newlines += text[i] == '\n';
    out += newlines >= 2 ? "\n" : " ";
  }
  return out;
}

// Counts of each token pair (current, next) in the corpus read as prose:
// [vocab, vocab] row-major.
auto bigram_counts(const tokenizer& tok, std::int64_t vocab, const std::vector<fs::path>& corpus)
    -> std::vector<double> {
  std::vector<double> counts(static_cast<std::size_t>(vocab * vocab), 0.0);
  for (const auto& f : corpus) {
    const auto ids = tok.encode(as_prose(read_file(f)), false);
    for (std::size_t i = 1; i < ids.size(); ++i)
      counts[static_cast<std::size_t>(ids[i - 1] * vocab + ids[i])] += 1.0;
  }
  return counts;
}

// The least-squares targets: centred log P(next | current), add-α smoothed,
// each row scaled by √(1 + count(current)) (returned in row_scale) so the
// fit spends its capacity on the tokens that occur.
auto bigram_targets(const std::vector<double>& counts, std::int64_t vocab,
                    std::vector<double>& row_scale) -> std::vector<double> {
  constexpr double alpha = 0.5;
  std::vector<double> l(counts.size());
  row_scale.assign(static_cast<std::size_t>(vocab), 1.0);
  for (std::int64_t a = 0; a < vocab; ++a) {
    const double* c = counts.data() + a * vocab;
    double* row = l.data() + a * vocab;
    double total = 0.0;
    for (std::int64_t b = 0; b < vocab; ++b) total += c[b];
    double mean = 0.0;
    for (std::int64_t b = 0; b < vocab; ++b)
      mean += row[b] = std::log((c[b] + alpha) / (total + alpha * static_cast<double>(vocab)));
    mean /= static_cast<double>(vocab);
    const double weight = std::sqrt(1.0 + total);
    row_scale[static_cast<std::size_t>(a)] = weight;
    for (std::int64_t b = 0; b < vocab; ++b) row[b] = (row[b] - mean) * weight;
  }
  return l;
}

// Temperature scaling (Guo et al., ICML'17): least squares leaves the logits
// too flat, so the head is multiplied by the factor that minimises the
// corpus' cross-entropy under the model's bigram distribution.
void calibrate(const std::vector<double>& counts, const std::vector<float>& embed,
               std::vector<float>& head, std::int64_t v, std::int64_t d) {
  std::vector<double> h(static_cast<std::size_t>(v * d)), w(h.size()), z(static_cast<std::size_t>(v * v));
  for (std::int64_t i = 0; i < v; ++i) {
    double ss = 0.0;
    for (std::int64_t j = 0; j < d; ++j) ss += static_cast<double>(embed[static_cast<std::size_t>(i * d + j)]) * embed[static_cast<std::size_t>(i * d + j)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + 1e-5);
    for (std::int64_t j = 0; j < d; ++j) {
      h[static_cast<std::size_t>(i * d + j)] = embed[static_cast<std::size_t>(i * d + j)] * inv;
      w[static_cast<std::size_t>(i * d + j)] = head[static_cast<std::size_t>(i * d + j)];
    }
  }
  const int vi = static_cast<int>(v), di = static_cast<int>(d);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, vi, vi, di, 1.0, h.data(), di, w.data(), di,
              0.0, z.data(), vi);
  double best_scale = 1.0, best_loss = INFINITY;
  for (double scale : {0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0}) {
    double loss = 0.0;
    for (std::int64_t a = 0; a < v; ++a) {
      const double* za = z.data() + a * v;
      const double* ca = counts.data() + a * v;
      double mx = -INFINITY, sum = 0.0;
      for (std::int64_t b = 0; b < v; ++b) mx = std::max(mx, scale * za[b]);
      for (std::int64_t b = 0; b < v; ++b) sum += std::exp(scale * za[b] - mx);
      const double log_z = mx + std::log(sum);
      for (std::int64_t b = 0; b < v; ++b)
        if (ca[b] > 0) loss += ca[b] * (log_z - scale * za[b]);
    }
    if (loss < best_loss) {
      best_loss = loss;
      best_scale = scale;
    }
  }
  for (auto& x : head) x = static_cast<float>(x * best_scale);
}

// Solves (A) X = B in place for symmetric positive definite A [n, n], B [n, m].
void cholesky_solve(std::vector<double>& a, std::vector<double>& b, std::int64_t n, std::int64_t m) {
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t k = 0; k < j; ++k) a[j * n + j] -= a[j * n + k] * a[j * n + k];
    a[j * n + j] = std::sqrt(a[j * n + j]);
    for (std::int64_t i = j + 1; i < n; ++i) {
      for (std::int64_t k = 0; k < j; ++k) a[i * n + j] -= a[i * n + k] * a[j * n + k];
      a[i * n + j] /= a[j * n + j];
    }
  }
  for (std::int64_t c = 0; c < m; ++c) {
    for (std::int64_t i = 0; i < n; ++i) { // L y = b
      for (std::int64_t k = 0; k < i; ++k) b[i * m + c] -= a[i * n + k] * b[k * m + c];
      b[i * m + c] /= a[i * n + i];
    }
    for (std::int64_t i = n - 1; i >= 0; --i) { // Lᵀ x = y
      for (std::int64_t k = i + 1; k < n; ++k) b[i * m + c] -= a[k * n + i] * b[k * m + c];
      b[i * m + c] /= a[i * n + i];
    }
  }
}

// Embeddings spanning the dominant subspace of the bigram matrix (randomised
// range finder, Halko et al. 2011) and the output layer that best maps their
// RMS-normalised rows back to the bigram log-probabilities (least squares).
void fit_bigram(const std::vector<double>& l, const std::vector<double>& row_scale, std::int64_t v, std::int64_t d, std::uint64_t seed,
                std::vector<float>& embed, std::vector<float>& head) {
  rng r(seed);
  std::vector<double> omega(static_cast<std::size_t>(v * d)), y(omega.size()), z(omega.size());
  for (auto& x : omega) x = r.normal();
  const int vi = static_cast<int>(v), di = static_cast<int>(d);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, vi, di, vi, 1.0, l.data(), vi,
              omega.data(), di, 0.0, y.data(), di);
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, vi, di, vi, 1.0, l.data(), vi, y.data(), di,
              0.0, z.data(), di); // one power iteration sharpens the subspace
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, vi, di, vi, 1.0, l.data(), vi, z.data(),
              di, 0.0, y.data(), di);
  for (std::int64_t j = 0; j < d; ++j) { // modified Gram-Schmidt on the columns
    for (std::int64_t k = 0; k < j; ++k) {
      double dot = 0.0;
      for (std::int64_t i = 0; i < v; ++i) dot += y[i * d + j] * y[i * d + k];
      for (std::int64_t i = 0; i < v; ++i) y[i * d + j] -= dot * y[i * d + k];
    }
    double norm = 0.0;
    for (std::int64_t i = 0; i < v; ++i) norm += y[i * d + j] * y[i * d + j];
    norm = std::sqrt(norm);
    for (std::int64_t i = 0; i < v; ++i) y[i * d + j] /= norm;
  }
  // Embedding entries O(1); h = rmsnorm(embedding) as the final norm (weight 1) sees it.
  embed.resize(static_cast<std::size_t>(v * d));
  std::vector<double> h(static_cast<std::size_t>(v * d));
  for (std::int64_t i = 0; i < v; ++i) {
    double ss = 0.0;
    for (std::int64_t j = 0; j < d; ++j) {
      const double e = y[i * d + j] * std::sqrt(static_cast<double>(v));
      embed[static_cast<std::size_t>(i * d + j)] = static_cast<float>(e);
      ss += e * e;
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + 1e-5);
    // weighted least squares: rows of h carry √weight like the rows of l
    for (std::int64_t j = 0; j < d; ++j)
      h[i * d + j] = embed[static_cast<std::size_t>(i * d + j)] * inv * row_scale[static_cast<std::size_t>(i)];
  }
  std::vector<double> a(static_cast<std::size_t>(d * d)), b(static_cast<std::size_t>(d * v));
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, di, di, vi, 1.0, h.data(), di, h.data(), di,
              0.0, a.data(), di);
  for (std::int64_t j = 0; j < d; ++j) a[j * d + j] += 1e-3 * a[j * d + j] + 1e-6;
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, di, vi, vi, 1.0, h.data(), di, l.data(), vi,
              0.0, b.data(), vi);
  cholesky_solve(a, b, d, v);
  head.resize(static_cast<std::size_t>(v * d));
  for (std::int64_t i = 0; i < v; ++i)
    for (std::int64_t j = 0; j < d; ++j) head[static_cast<std::size_t>(i * d + j)] = static_cast<float>(b[j * v + i]);
}

void write_tokenizer_config(const fs::path& dir) {
  // Zephyr's format (troupe's built-in "zephyr" template): the server renders it.
  std::ofstream out(dir / "tokenizer_config.json");
  out << "{\n  \"bos_token\": \"<s>\",\n  \"eos_token\": \"</s>\",\n"
         "  \"chat_template\": \"{% for message in messages %}"
         "{{ '<|' + message['role'] + '|>\\\\n' + message['content'] + eos_token + '\\\\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{ '<|assistant|>\\\\n' }}{% endif %}\"\n}\n";
}

} // namespace

void make_model(std::string_view preset, const fs::path& dir, std::uint64_t seed) {
  make_model_options o;
  o.seed = seed;
  make_model(preset, dir, o);
}

auto small_config(model_config c, std::int64_t hidden) -> model_config {
  const std::int64_t head_dim = 16;
  if (hidden <= 0 || hidden % 32 != 0) throw std::invalid_argument("the small hidden size must be a multiple of 32");
  c.hidden_size = hidden;
  c.intermediate_size = 2 * hidden;
  c.num_attention_heads = hidden / head_dim;
  // OLMoE's k norm spans the model's width in llama.cpp: as many KV heads as heads.
  c.num_key_value_heads = hidden / head_dim / (c.family() == model_family::olmoe ? 1 : 2);
  c.head_dim = head_dim;
  c.num_hidden_layers = 2;
  // Gemma interleaves sliding and global layers: keep one of each.
  if (!c.sliding_layers.empty()) c.sliding_layers = {true, false};
  if (c.query_pre_attn_scalar > 0) c.query_pre_attn_scalar = static_cast<double>(head_dim);
  // LongRoPE has a factor per rotary frequency: head_dim / 2 of them.
  auto& rs = c.rope_scaling;
  if (!rs.short_factor.empty()) rs.short_factor.resize(static_cast<std::size_t>(head_dim / 2), 1.0);
  if (!rs.long_factor.empty()) rs.long_factor.resize(static_cast<std::size_t>(head_dim / 2), 1.0);
  // At most 16 experts, 4 a token, each of hidden or (where the expert is
  // the dense size) 2 · hidden.
  if (c.family() == model_family::gpt_oss) c.sliding_window = 16; // within a test's sequences
  if (c.is_moe()) {
    c.num_experts = std::min<std::int64_t>(c.num_experts, 16);
    c.num_experts_per_tok = std::min<std::int64_t>(c.num_experts_per_tok, 4);
    c.moe_intermediate_size = c.architecture == "Qwen3MoeForCausalLM" ? hidden : c.intermediate_size;
  }
  c.torch_dtype = "float32";
  return c;
}

namespace {

// A real model's tokenizer files into dir; the config's vocabulary covers
// the tokenizer and its BOS/EOS are the tokenizer's.
void copy_tokenizer(const fs::path& from, const fs::path& dir, model_config& config) {
  const auto tok = tokenizer::load_dir(from); // throws the one line for a directory without one
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "chat_template.jinja",
                           "special_tokens_map.json"})
    if (fs::exists(from / name)) fs::copy_file(from / name, dir / name, fs::copy_options::overwrite_existing);
  config.vocab_size = std::max<std::int64_t>(config.vocab_size, tok.vocab_size());
  config.bos_token_id.reset();
  if (tok.bos_id() >= 0) config.bos_token_id = tok.bos_id();
  config.eos_token_ids.clear();
  if (tok.eos_id() >= 0) config.eos_token_ids.push_back(tok.eos_id());
}

/// make_model_options::eos_boost's embedding (and head, when not tied).
void brief_answers(const model_config& c, std::uint64_t seed, double boost, random_model_options& o) {
  if (c.eos_token_ids.empty()) throw std::invalid_argument("eos_boost: the model has no EOS token");
  const auto v = c.vocab_size, d = c.hidden_size;
  std::vector<float> embed(static_cast<std::size_t>(v * d));
  rng r(seed ^ 0x9e3779b97f4a7c15ULL);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (std::int64_t i = 0; i < v; ++i)
    for (std::int64_t j = 0; j < d; ++j)
      embed[static_cast<std::size_t>(i * d + j)] = static_cast<float>(j == 0 ? 8 * scale : scale * r.normal());
  embed[static_cast<std::size_t>(c.eos_token_ids.front() * d)] += static_cast<float>(boost * 8 * scale);
  if (!c.tie_word_embeddings) o.fixed["lm_head.weight"] = embed;
  o.fixed["model.embed_tokens.weight"] = std::move(embed);
  o.fixed["model.norm.weight"] = std::vector<float>(static_cast<std::size_t>(d), 1.0f);
  o.residual_scale = 0.05;
}

} // namespace

void make_model(std::string_view preset, const fs::path& dir, const make_model_options& options) {
  auto config = preset_config(preset);
  if (!config) throw std::invalid_argument("unknown preset '" + std::string(preset) + "'");
  if (options.small) config = small_config(*config, options.small_hidden);
  if (options.layers > 0) {
    config->num_hidden_layers = options.layers;
    if (!config->sliding_layers.empty()) config->sliding_layers.resize(static_cast<std::size_t>(options.layers));
  }
  if (options.small && options.small_vocab > 0) {
    config->vocab_size = options.small_vocab;
    config->bos_token_id = 1;
    config->eos_token_ids = {2};
  }
  fs::create_directories(dir);
  const auto corpus = license_corpus_files();
  if (!options.tokenizer_dir.empty()) {
    copy_tokenizer(options.tokenizer_dir, dir, *config);
  } else {
    const std::int64_t tok_vocab = std::min<std::int64_t>(config->vocab_size, 2000);
    train_tokenizer(corpus, static_cast<int>(tok_vocab), dir / "tokenizer.model");
    write_tokenizer_config(dir);
  }
  const auto seed = options.seed;

  random_model_options o;
  o.seed = seed;
  o.type = config->torch_dtype == "bfloat16" ? dtype::bf16 : dtype::f32;
  if (preset == "tiny" && options.tokenizer_dir.empty() && !options.small) {
    const auto tok = tokenizer::load_dir(dir);
    const auto counts = bigram_counts(tok, config->vocab_size, corpus);
    std::vector<double> row_scale;
    const auto targets = bigram_targets(counts, config->vocab_size, row_scale);
    std::vector<float> embed, head;
    fit_bigram(targets, row_scale, config->vocab_size, config->hidden_size, seed, embed, head);
    calibrate(counts, embed, head, config->vocab_size, config->hidden_size);
    o.fixed["model.embed_tokens.weight"] = std::move(embed);
    o.fixed["lm_head.weight"] = std::move(head);
    o.fixed["model.norm.weight"] = std::vector<float>(static_cast<std::size_t>(config->hidden_size), 1.0f);
    o.residual_scale = 0.05;
  }
  if (options.eos_boost > 0) brief_answers(*config, seed, options.eos_boost, o);
  write_random_model(dir, *config, o);
}

} // namespace troupe
