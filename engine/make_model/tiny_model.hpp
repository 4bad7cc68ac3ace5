#pragma once
// `troupe make-model`: complete model directories (config.json,
// model.safetensors, tokenizer.model, tokenizer_config.json) for the presets.

#include "engine/model/model_config.hpp"

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace troupe {

/// Writes a preset's model directory. For `tiny` the output layer is fitted to
/// the corpus' bigram statistics (so sampled text reads like licence prose)
/// while attention and MLP weights stay random and non-zero; the others get
/// random weights in their real shapes (BF16 for the 1B+ presets). Throws
/// std::invalid_argument for an unknown preset, model_error on I/O failure.
void make_model(std::string_view preset, const std::filesystem::path& dir, std::uint64_t seed);

struct make_model_options {
  std::uint64_t seed = 1;
  /// Non-empty: a real model's tokenizer (tokenizer.json or tokenizer.model,
  /// tokenizer_config.json, chat_template.jinja: whichever it has) is copied
  /// from this directory instead of training one; the vocabulary grows to
  /// cover it and BOS/EOS are its.
  std::filesystem::path tokenizer_dir;
  /// The preset's family and features (biases, norms, windows, RoPE
  /// scaling, soft-caps, tied head) at test size: 2 layers, hidden 64 in 4
  /// heads of 16 (2 KV heads), intermediate 128, F32; the vocabulary as it is.
  /// A mixture of experts keeps at most 16 experts, 4 a token.
  bool small = false;
  /// The small shape's hidden size (a multiple of 32): hidden / 16 heads of
  /// 16, half as many KV heads, intermediate 2 * hidden. 256 makes every
  /// matrix row whole blocks of GGUF's K-quants.
  std::int64_t small_hidden = 64;
  /// > 0: the small shape's vocabulary (BOS 1, EOS 2, as the trained
  /// tokenizer's), so a model of a 150k-token vocabulary stays small.
  std::int64_t small_vocab = 0;
  /// > 0: the preset's own shape with this many layers (benchmarks of a
  /// model too large for the machine: its real per-layer shapes, fewer of them).
  std::int64_t layers = 0;
  /// > 0: the model ends its answers soon, for clients that wait for the
  /// end (agents' tests): every token's embedding shares one direction
  /// (dimension 0, at 8x the others' scale; the layers' outputs at 0.05x),
  /// and the first EOS token's row has eos_boost more of it, so the
  /// logit of EOS stands out by about 6x eos_boost (1.7: ~1 token in 10).
  double eos_boost = 0;
};

/// make_model with options; throws model_error for a tokenizer directory
/// with no tokenizer in it (or one troupe cannot read).
void make_model(std::string_view preset, const std::filesystem::path& dir, const make_model_options& options);

/// The preset's config at test size (make_model_options::small), hidden
/// as make_model_options::small_hidden says.
auto small_config(model_config c, std::int64_t hidden = 64) -> model_config;

} // namespace troupe
