#pragma once
// A Llama-family model's hyper-parameters, read from a Hugging Face
// config.json (+ generation_config.json where present).

#include "engine/types.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// llama3-style RoPE frequency scaling ("rope_scaling": {"rope_type": "llama3"}).
struct rope_scaling_config {
  std::string type;                 ///< "llama3" or "linear"; empty: none
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;

  friend auto operator==(const rope_scaling_config&, const rope_scaling_config&) -> bool = default;
};

struct model_config {
  std::string architecture = "LlamaForCausalLM"; ///< or "MistralForCausalLM"
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
  std::string torch_dtype = "float32";
  std::optional<token_id> bos_token_id;
  std::vector<token_id> eos_token_ids;  ///< from config, overridden by generation_config

  /// Defaults from generation_config.json, applied when a request leaves them unset.
  std::optional<float> default_temperature;
  std::optional<float> default_top_p;
  std::optional<std::int32_t> default_top_k;

  /// Reads dir/config.json and, if present, dir/generation_config.json.
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

  friend auto operator==(const model_config&, const model_config&) -> bool = default;
};

} // namespace troupe
