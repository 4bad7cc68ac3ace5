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

auto family_config(std::string_view architecture, std::int64_t vocab, std::int64_t hidden, std::int64_t inter,
                   std::int64_t layers, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim)
    -> model_config {
  auto c = llama_config(vocab, hidden, inter, layers, heads, kv_heads);
  c.architecture = std::string(architecture);
  c.head_dim = head_dim;
  const auto f = c.family();
  if (f == model_family::gemma2 || f == model_family::gemma3) {
    c.hidden_act = "gelu_pytorch_tanh";
    c.tie_word_embeddings = true;
    c.query_pre_attn_scalar = static_cast<double>(head_dim);
    c.sliding_window = 4096;
    c.sliding_layers.resize(static_cast<std::size_t>(layers));
    for (std::int64_t i = 0; i < layers; ++i)
      c.sliding_layers[static_cast<std::size_t>(i)] = f == model_family::gemma2 ? i % 2 == 0 : (i + 1) % 6 != 0;
    if (f == model_family::gemma3) c.rope_local_base_freq = 10000.0;
  }
  return c;
}

auto with_experts(model_config c, std::int64_t experts, std::int64_t per_token, std::int64_t expert_size,
                  bool norm_topk_prob) -> model_config {
  c.num_experts = experts;
  c.num_experts_per_tok = per_token;
  c.moe_intermediate_size = expert_size;
  c.norm_topk_prob = norm_topk_prob;
  return c;
}

namespace {

// Phi-3.5-mini-instruct's LongRoPE factors, from its config.json.
const std::vector<double> phi35_long_factor = {
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,  1.5899999141693115,
    1.600000023841858,  1.6200000047683716, 2.620000123977661,  3.2300000190734863, 3.2300000190734863,
    4.789999961853027,  7.400000095367432,  7.700000286102295,  9.09000015258789,   12.199999809265137,
    17.670000076293945, 24.46000099182129,  28.57000160217285,  30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305,  42.320003509521484, 44.96000289916992,  50.340003967285156,
    50.45000457763672,  57.55000305175781,  57.93000411987305,  58.21000289916992,  60.1400032043457,
    62.61000442504883,  62.62000274658203,  62.71000289916992,  63.1400032043457,   63.1400032043457,
    63.77000427246094,  63.93000411987305,  63.96000289916992,  63.970001220703125, 64.02999877929688,
    64.06999969482422,  64.08000183105469,  64.12000274658203,  64.41000366210938,  64.4800033569336,
    64.51000213623047,  64.52999877929688,  64.83999633789062};
const std::vector<double> phi35_short_factor = {
    1.0,                1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979,
    1.0999999046325684, 1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662,
    1.2899998426437378, 1.339999794960022,  1.679999828338623,  1.7899998426437378, 1.8199998140335083,
    1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0199997425079346, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0799996852874756, 2.0899996757507324, 2.189999580383301,  2.2199995517730713, 2.5899994373321533,
    2.729999542236328,  2.749999523162842,  2.8399994373321533};


// The mixtures of experts.
auto moe_preset(std::string_view name) -> std::optional<model_config> {
  if (name == "qwen3-30b-a3b") {
    auto c = with_experts(family_config("Qwen3MoeForCausalLM", 151936, 2048, 6144, 48, 32, 4, 128), 128, 8, 768, true);
    c.max_position_embeddings = 40960;
    c.rope_theta = 1000000.0;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 151643;
    c.eos_token_ids = {151645, 151643};
    return c;
  }
  if (name == "mixtral-8x7b") {
    auto c = with_experts(family_config("MixtralForCausalLM", 32000, 4096, 14336, 32, 32, 8, 128), 8, 2, 14336, true);
    c.max_position_embeddings = 32768;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 1000000.0;
    c.torch_dtype = "bfloat16";
    return c;
  }
  if (name == "olmoe-1b-7b") { // OLMoE-1B-7B-0924
    auto c = with_experts(family_config("OlmoeForCausalLM", 50304, 2048, 1024, 16, 16, 16, 128), 64, 8, 1024, false);
    c.max_position_embeddings = 4096;
    c.rms_norm_eps = 1e-5;
    c.torch_dtype = "bfloat16";
    c.bos_token_id.reset();
    c.eos_token_ids = {50279};
    return c;
  }
  if (name == "gpt-oss-20b") {
    auto c = with_experts(family_config("GptOssForCausalLM", 201088, 2880, 2880, 24, 64, 8, 64), 32, 4, 2880, false);
    c.max_position_embeddings = 131072;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 150000.0;
    c.rope_scaling.type = "yarn";
    c.rope_scaling.factor = 32.0;
    c.rope_scaling.original_max_position_embeddings = 4096;
    c.rope_scaling.truncate = false;
    c.sliding_window = 128;
    c.sliding_layers.resize(24);
    for (std::size_t i = 0; i < 24; ++i) c.sliding_layers[i] = i % 2 == 0;
    c.swiglu_limit = 7.0;
    c.mxfp4_experts = true;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 199998;
    c.eos_token_ids = {200002, 199999, 200012};
    return c;
  }
  return std::nullopt;
}

} // namespace

auto preset_names() -> std::vector<std::string_view> {
  return {"tiny",         "stories110m", "tinyllama-1.1b", "llama-3.2-1b", "llama-3-8b",  "qwen2.5-0.5b",
          "qwen3-0.6b",   "gemma-2-2b",  "gemma-3-1b",     "smollm2-360m", "phi-3.5-mini",
          "mistral-7b-v0.3", "mistral-nemo-12b", "qwen3-30b-a3b", "mixtral-8x7b", "olmoe-1b-7b", "gpt-oss-20b"};
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
    c.rope_scaling = rope_scaling_config::llama3(32.0, 1.0, 4.0, 8192);
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
  // The shapes below are those of each model's config.json on the Hugging
  // Face hub; the weights are random.
  if (name == "qwen2.5-0.5b") {
    auto c = family_config("Qwen2ForCausalLM", 151936, 896, 4864, 24, 14, 2, 64);
    c.max_position_embeddings = 32768;
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = true;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 151643;
    c.eos_token_ids = {151645, 151643};
    return c;
  }
  if (name == "gemma-3-1b") { // its text config
    auto c = family_config("Gemma3ForCausalLM", 262144, 1152, 6912, 26, 4, 1, 256);
    c.max_position_embeddings = 32768;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1000000.0;
    c.rope_local_base_freq = 10000.0;
    c.query_pre_attn_scalar = 256;
    c.sliding_window = 512;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 2;
    c.eos_token_ids = {1, 106};
    return c;
  }
  if (name == "mistral-7b-v0.3") {
    auto c = family_config("MistralForCausalLM", 32768, 4096, 14336, 32, 32, 8, 128);
    c.max_position_embeddings = 32768;
    c.rope_theta = 1000000.0;
    c.torch_dtype = "bfloat16";
    return c;
  }
  if (name == "mistral-nemo-12b") {
    auto c = family_config("MistralForCausalLM", 131072, 5120, 14336, 40, 32, 8, 128);
    c.max_position_embeddings = 1024000;
    c.rope_theta = 1000000.0;
    c.torch_dtype = "bfloat16";
    return c;
  }
  if (name == "qwen3-0.6b") {
    auto c = family_config("Qwen3ForCausalLM", 151936, 1024, 3072, 28, 16, 8, 128);
    c.max_position_embeddings = 40960;
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = true;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 151643;
    c.eos_token_ids = {151645, 151643};
    return c;
  }
  if (name == "gemma-2-2b") {
    auto c = family_config("Gemma2ForCausalLM", 256000, 2304, 9216, 26, 8, 4, 256);
    c.max_position_embeddings = 8192;
    c.query_pre_attn_scalar = 256;
    c.attn_logit_softcapping = 50.0;
    c.final_logit_softcapping = 30.0;
    c.sliding_window = 4096;
    c.torch_dtype = "bfloat16"; // the hub's config says float32; bfloat16 halves the file
    c.bos_token_id = 2;
    c.eos_token_ids = {1, 107};
    return c;
  }
  if (name == "smollm2-360m") {
    auto c = family_config("LlamaForCausalLM", 49152, 960, 2560, 32, 15, 5, 64);
    c.max_position_embeddings = 8192;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 100000.0;
    c.tie_word_embeddings = true;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 1;
    c.eos_token_ids = {2};
    return c;
  }
  if (name == "phi-3.5-mini") {
    auto c = family_config("Phi3ForCausalLM", 32064, 3072, 8192, 32, 32, 32, 96);
    c.max_position_embeddings = 131072;
    c.rms_norm_eps = 1e-5;
    c.rope_scaling.type = "longrope";
    c.rope_scaling.original_max_position_embeddings = 4096;
    c.rope_scaling.factor = 131072.0 / 4096.0;
    c.rope_scaling.short_factor = phi35_short_factor;
    c.rope_scaling.long_factor = phi35_long_factor;
    c.sliding_window = 262144;
    c.torch_dtype = "bfloat16";
    c.bos_token_id = 1;
    c.eos_token_ids = {32007, 32001, 32000};
    return c;
  }
  return moe_preset(name);
}

} // namespace troupe
