#include "engine/model/presets.hpp"

namespace troupe {
auto llama_config(std::int64_t vocab, std::int64_t hidden, std::int64_t inter, std::int64_t layers,
                  std::int64_t heads, std::int64_t kv_heads) -> model_config {
  model_config c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

auto preset_names() -> std::vector<std::string_view> {
  return {"tiny", "stories110m", "tinyllama-1.1b", "llama-3.2-1b", "llama-3-8b"};
}

auto preset_config(std::string_view name) -> std::optional<model_config> {
  if (name == "tiny") {
    auto c = llama_config(2000, 128, 352, 2, 4, 2);
    c.max_position_embeddings = 2048;
    c.rms_norm_eps = 1e-5;
    return c;
  }
  if (name == "stories110m") { // llama2.c's stories110M: shared classifier
    auto c = llama_config(32000, 768, 2048, 12, 12, 12);
    c.max_position_embeddings = 1024;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = true;
    return c;
  }
  if (name == "tinyllama-1.1b") {
    auto c = llama_config(32000, 2048, 5632, 22, 32, 4);
    c.rms_norm_eps = 1e-5;
    c.torch_dtype = "bfloat16";
    return c;
  }
  if (name == "llama-3.2-1b") {
    auto c = llama_config(128256, 2048, 8192, 16, 32, 8);
    c.max_position_embeddings = 131072;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 500000.0;
    c.rope_scaling = {"llama3", 32.0, 1.0, 4.0, 8192};
    c.tie_word_embeddings = true;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 128000;
    c.eos_token_ids = {128001};
    return c;
  }
  if (name == "llama-3-8b") {
    auto c = llama_config(128256, 4096, 14336, 32, 32, 8);
    c.max_position_embeddings = 8192;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 500000.0;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 128000;
    c.eos_token_ids = {128001};
    return c;
  }
  return std::nullopt;
}

} // namespace troupe
