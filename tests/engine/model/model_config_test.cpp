#include "engine/model/model_config.hpp"
#include "engine/model/presets.hpp"
#include "engine/sampling/sampler.hpp"

#include "tests/engine/model/config_test_util.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using namespace troupe;
using troupe::test::error_of;
using troupe::test::temp_dir;
using troupe::test::write_file;

namespace {

// Copies of the real Hugging Face files.
constexpr const char* tinyllama_config = R"({
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 5632,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 22,
  "num_key_value_heads": 4,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0",
  "use_cache": true,
  "vocab_size": 32000
}
)";
constexpr const char* tinyllama_generation = R"({
  "bos_token_id": 1,
  "eos_token_id": 2,
  "max_length": 2048,
  "pad_token_id": 0,
  "transformers_version": "4.35.0"
}
)";

constexpr const char* llama2_config = R"({
  "_name_or_path": "meta-llama/Llama-2-7b-hf",
  "architectures": [
    "LlamaForCausalLM"
  ],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
}
)";
constexpr const char* llama2_generation = R"({
  "bos_token_id": 1,
  "do_sample": true,
  "eos_token_id": 2,
  "pad_token_id": 0,
  "temperature": 0.6,
  "max_length": 4096,
  "top_p": 0.9,
  "transformers_version": "4.31.0.dev0"
}
)";

constexpr const char* mistral_config = R"({
  "architectures": [
    "MistralForCausalLM"
  ],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
}
)";

constexpr const char* llama32_config = R"({
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
)";
constexpr const char* llama32_generation = R"({
  "_from_model_config": true,
  "bos_token_id": 128000,
  "do_sample": true,
  "eos_token_id": [128001, 128008, 128009],
  "temperature": 0.6,
  "top_p": 0.9,
  "transformers_version": "4.45.0.dev0"
}
)";

/// Writes config.json (and generation_config.json unless null) and loads them.
auto load(const temp_dir& dir, const std::string& config, const char* generation = nullptr) -> model_config {
  return troupe::test::load_config(dir, config, generation);
}

/// The error from loading config.json with one substring replaced.
auto load_error(const temp_dir& dir, std::string_view from, std::string_view to,
                const std::string& base = tinyllama_config) -> std::string {
  return troupe::test::edited_config_error(dir, from, to, base);
}

using troupe::test::check_round_trip;

} // namespace

TEST_CASE("TinyLlama-1.1B-Chat-v1.0 config") {
  const temp_dir dir;
  const auto c = load(dir, tinyllama_config, tinyllama_generation);
  CHECK(c.architecture == "LlamaForCausalLM");
  CHECK(c.vocab_size == 32000);
  CHECK(c.hidden_size == 2048);
  CHECK(c.intermediate_size == 5632);
  CHECK(c.num_hidden_layers == 22);
  CHECK(c.num_attention_heads == 32);
  CHECK(c.num_key_value_heads == 4);
  CHECK(c.head_dim == 64);
  CHECK(c.max_position_embeddings == 2048);
  CHECK(c.rms_norm_eps == 1e-5);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rope_scaling.type.empty());
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.torch_dtype == "bfloat16");
  CHECK(c.bos_token_id == 1);
  CHECK(c.eos_token_ids == std::vector<token_id>{2});
  CHECK_FALSE(c.default_temperature.has_value());
  CHECK_FALSE(c.default_top_p.has_value());
  CHECK_FALSE(c.default_top_k.has_value());
  check_round_trip(c);
}

TEST_CASE("Llama-2-7b-hf config: rope_theta defaults, sampling defaults from generation_config") {
  const temp_dir dir;
  const auto c = load(dir, llama2_config, llama2_generation);
  CHECK(c.hidden_size == 4096);
  CHECK(c.intermediate_size == 11008);
  CHECK(c.num_key_value_heads == 32);
  CHECK(c.head_dim == 128);
  CHECK(c.max_position_embeddings == 4096);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.torch_dtype == "float16");
  CHECK(c.default_temperature == 0.6f);
  CHECK(c.default_top_p == 0.9f);
  CHECK_FALSE(c.default_top_k.has_value());
  check_round_trip(c);
}

TEST_CASE("Mistral-7B-v0.1 config: sliding_window honoured, null for none") {
  const temp_dir dir;
  const auto c = load(dir, mistral_config);
  CHECK(c.architecture == "MistralForCausalLM");
  CHECK(c.intermediate_size == 14336);
  CHECK(c.num_key_value_heads == 8);
  CHECK(c.head_dim == 128);
  CHECK(c.max_position_embeddings == 32768);
  CHECK(c.eos_token_ids == std::vector<token_id>{2});
  check_round_trip(c);

  CHECK(c.sliding_window == 4096);
  CHECK(c.is_sliding(0));
  CHECK(c.is_sliding(31));

  std::string with_null = mistral_config;
  with_null.replace(with_null.find("4096,\n  \"tie"), 4, "null");
  auto no_window = c;
  no_window.sliding_window = 0;
  CHECK(load(dir, with_null) == no_window);
}

TEST_CASE("Llama-3.2-1B config: llama3 rope scaling, tied embeddings, eos list from generation_config") {
  const temp_dir dir;
  const auto c = load(dir, llama32_config, llama32_generation);
  CHECK(c.vocab_size == 128256);
  CHECK(c.num_hidden_layers == 16);
  CHECK(c.head_dim == 64);
  CHECK(c.max_position_embeddings == 131072);
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rope_scaling.type == "llama3");
  CHECK(c.rope_scaling.factor == 32.0);
  CHECK(c.rope_scaling.low_freq_factor == 1.0);
  CHECK(c.rope_scaling.high_freq_factor == 4.0);
  CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
  CHECK(c.tie_word_embeddings);
  CHECK(c.bos_token_id == 128000);
  CHECK(c.eos_token_ids == std::vector<token_id>{128001, 128008, 128009});
  CHECK(c.default_temperature == 0.6f);
  CHECK(c.default_top_p == 0.9f);
  check_round_trip(c);

  // Without generation_config.json the config's single eos applies.
  std::filesystem::remove(dir / "generation_config.json");
  CHECK(model_config::load(dir.path()).eos_token_ids == std::vector<token_id>{128001});
}

TEST_CASE("defaults for optional fields") {
  const temp_dir dir;
  const auto c = load(dir, R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": null})");
  CHECK(c.num_key_value_heads == 8);
  CHECK(c.head_dim == 8);
  CHECK(c.max_position_embeddings == 2048);
  CHECK(c.rms_norm_eps == 1e-6);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rope_scaling == rope_scaling_config{});
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.torch_dtype == "float32");
  CHECK_FALSE(c.bos_token_id.has_value());
  CHECK(c.eos_token_ids.empty());
  check_round_trip(c);
}

TEST_CASE("rope_scaling variants and generation_config overrides") {
  const temp_dir dir;
  const std::string base = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
    "bos_token_id": 5, "eos_token_id": [6, 7], "dtype": "bfloat16", "rope_scaling": )";
  auto c = load(dir, base + R"({"type": "linear", "factor": 2.5}})",
                R"({"bos_token_id": 9, "eos_token_id": 8, "temperature": 0, "top_k": 40, "top_p": 1, "min_p": 0.05,
                    "repetition_penalty": 1.25, "max_new_tokens": 2048})");
  CHECK(c.rope_scaling.type == "linear");
  CHECK(c.rope_scaling.factor == 2.5);
  CHECK(c.torch_dtype == "bfloat16");
  CHECK(c.bos_token_id == 9);
  CHECK(c.eos_token_ids == std::vector<token_id>{8});
  CHECK(c.default_temperature == 0.0f);
  CHECK(c.default_top_k == 40);
  CHECK(c.default_top_p == 1.0f);
  CHECK(c.default_min_p == 0.05f); // (vLLM reads these three too)
  CHECK(c.default_repetition_penalty == 1.25f);
  CHECK(c.default_max_tokens == 2048);
  const auto d = default_sampling_params(c);
  CHECK(d.min_p == 0.05f);
  CHECK(d.repetition_penalty == 1.25f);
  CHECK(d.top_k == 40);
  check_round_trip(c);
  const auto g = (dir / "generation_config.json").string() + ": ";
  for (const auto& [bad, error] : std::vector<std::pair<std::string, std::string>>{
           {R"({"min_p": 1.5})", "field 'min_p' must be between 0 and 1"},
           {R"({"repetition_penalty": 0})", "field 'repetition_penalty' must be greater than 0"},
           {R"({"max_new_tokens": 0})", "field 'max_new_tokens' must be 1 or more"}}) {
    CHECK(error_of([&] { load(dir, base + R"({"type": "linear", "factor": 2.5}})", bad.c_str()); }) == g + error);
  }

  std::filesystem::remove(dir / "generation_config.json");
  c = load(dir, base + R"({"rope_type": "default"}})");
  CHECK(c.rope_scaling == rope_scaling_config{});
  CHECK(c.bos_token_id == 5);
  CHECK(c.eos_token_ids == std::vector<token_id>{6, 7});
  const auto p = (dir / "config.json").string() + ": ";
  CHECK(error_of([&] { load(dir, base + R"({"rope_type": "ntk", "factor": 4}})"); }) ==
        p + "unsupported rope_scaling type 'ntk' (supported: llama3, linear, dynamic, yarn, longrope)");
  CHECK(error_of([&] { load(dir, base + R"({"rope_type": "llama3", "factor": 8}})"); }) ==
        p + "missing field 'rope_scaling.low_freq_factor'");
  CHECK(error_of([&] { load(dir, base + R"({"factor": 8}})"); }) == p + "missing field 'rope_scaling.rope_type'");
  CHECK(error_of([&] { load(dir, base + R"("linear"})"); }) == p + "field 'rope_scaling' must be an object or null");
  CHECK(error_of([&] { load(dir, base + R"({"type": "linear", "factor": -1}})"); }) ==
        p + "field 'rope_scaling.factor' must be positive, got -1");
  CHECK(error_of([&] {
          load(dir, base + R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4,
                              "original_max_position_embeddings": 8192}})");
        }) == p + "rope_scaling.high_freq_factor must exceed rope_scaling.low_freq_factor");
}

TEST_CASE("config.json errors name the file and the problem") {
  const temp_dir dir;
  const auto p = (dir / "config.json").string() + ": ";
  CHECK(error_of([&] { model_config::load(dir.path()); }) == p + "file not found");
  CHECK(error_of([&] { load(dir, "{\"vocab_size\": "); }) == p + "not valid JSON");
  CHECK(error_of([&] { load(dir, "[]"); }) == p + "not a JSON object");
  CHECK(load_error(dir, "LlamaForCausalLM", "GPT2LMHeadModel") ==
        p + "unsupported architecture 'GPT2LMHeadModel' (supported: LlamaForCausalLM, MistralForCausalLM, "
            "Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM, "
                     "Qwen3MoeForCausalLM, MixtralForCausalLM, OlmoeForCausalLM, GptOssForCausalLM)");
  // Flags troupe does not implement stop loading, one line naming them.
  CHECK(load_error(dir, "\"attention_bias\": false", "\"attention_bias\": true") ==
        p + "field 'attention_bias' true is not supported");
  CHECK(load_error(dir, "\"hidden_act\": \"silu\"", "\"mlp_bias\": true") == p + "field 'mlp_bias' true is not supported");
  CHECK(load_error(dir, "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"") ==
        p + "field 'hidden_act' 'gelu' is not supported for LlamaForCausalLM (only silu)");
  CHECK(load_error(dir, "\"hidden_act\": \"silu\"", "\"partial_rotary_factor\": 0.5") ==
        p + "field 'partial_rotary_factor' 0.5 is not supported");
  CHECK(load_error(dir, "\"hidden_act\": \"silu\"", "\"quantization_config\": {\"bits\": 4}") ==
        p + "field 'quantization_config' (a quantized checkpoint) is not supported");
  CHECK(load_error(dir, "\"hidden_act\": \"silu\"", "\"final_logit_softcapping\": 30.0") ==
        p + "field 'final_logit_softcapping' outside Gemma is not supported");
  CHECK(load_error(dir, "\"hidden_act\": \"silu\"", "\"use_bidirectional_attention\": true") ==
        p + "field 'use_bidirectional_attention' true is not supported");
  CHECK(load_error(dir, "\"architectures\"", "\"archs\"") == p + "missing field 'architectures'");
  CHECK(load_error(dir, "[\n    \"LlamaForCausalLM\"\n  ]", "[]") ==
        p + "field 'architectures' must be a non-empty list of strings");
  CHECK(load_error(dir, "\"hidden_size\"", "\"hidden\"") == p + "missing field 'hidden_size'");
  CHECK(load_error(dir, "\"num_hidden_layers\": 22", "\"num_hidden_layers\": null") ==
        p + "missing field 'num_hidden_layers'");
  CHECK(load_error(dir, "5632", "\"5632\"") == p + "field 'intermediate_size' must be an integer");
  CHECK(load_error(dir, "5632", "5632.5") == p + "field 'intermediate_size' must be an integer");
  CHECK(load_error(dir, "1e-05", "\"small\"") == p + "field 'rms_norm_eps' must be a number");
  CHECK(load_error(dir, "1e-05", "0") == p + "field 'rms_norm_eps' must be positive, got 0");
  CHECK(load_error(dir, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": 0") ==
        p + "field 'tie_word_embeddings' must be true or false");
  CHECK(load_error(dir, "\"vocab_size\": 32000", "\"vocab_size\": 0") ==
        p + "field 'vocab_size' must be positive, got 0");
  CHECK(load_error(dir, "\"num_key_value_heads\": 4", "\"num_key_value_heads\": 6") ==
        p + "num_attention_heads 32 is not a multiple of num_key_value_heads 6");
  CHECK(load_error(dir, "\"num_key_value_heads\": 4", "\"num_key_value_heads\": -4") ==
        p + "field 'num_key_value_heads' must be positive, got -4");
  CHECK(load_error(dir, "\"num_attention_heads\": 32", "\"num_attention_heads\": 30") ==
        p + "hidden_size 2048 is not a multiple of num_attention_heads 30");
  CHECK(load_error(dir, "\"eos_token_id\": 2", "\"eos_token_id\": 32000") ==
        p + "eos_token_id 32000 is outside the vocabulary (vocab_size 32000)");
  CHECK(load_error(dir, "\"eos_token_id\": 2", "\"eos_token_id\": [2, \"x\"]") ==
        p + "field 'eos_token_id' must be a token id or a list of token ids");
  CHECK(load_error(dir, "\"bos_token_id\": 1", "\"bos_token_id\": -1") ==
        p + "bos_token_id -1 is outside the vocabulary (vocab_size 32000)");
  CHECK(load_error(dir, "\"bos_token_id\": 1", "\"bos_token_id\": [1, 2]") ==
        p + "field 'bos_token_id' must be a single token id");
  // head_dim need not be hidden / heads (it is given explicitly in Llama 3.2).
  CHECK(load_error(dir, "\"hidden_act\"", "\"head_dim\": 80, \"hidden_act\"").empty());
  CHECK(load_error(dir, "\"hidden_act\"", "\"head_dim\": 63, \"hidden_act\"") ==
        p + "head_dim must be even for rotary embeddings, got 63");
}

namespace {

constexpr const char* qwen25_config = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
})";

constexpr const char* gemma2_config = R"({
  "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
  "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
  "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
  "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
  "transformers_version": "4.42.4", "use_cache": true, "vocab_size": 256000
})";

// Gemma 3 1B's text model, its fields nested as multimodal configs nest them.
constexpr const char* gemma3_config = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
  "text_config": {"attention_bias": false, "attn_logit_softcapping": null, "bos_token_id": 2, "eos_token_id": [1, 106],
  "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
  "intermediate_size": 6912, "max_position_embeddings": 32768, "num_attention_heads": 4, "num_hidden_layers": 26,
  "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16", "vocab_size": 262144}
})";

constexpr const char* phi35_config = R"({
  "architectures": ["Phi3ForCausalLM"], "bos_token_id": 1, "eos_token_id": 32000, "hidden_act": "silu",
  "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 131072, "model_type": "phi3",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
  "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
  "rope_scaling": {"long_factor": [LONG], "short_factor": [SHORT], "type": "longrope"},
  "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 32064
})";

} // namespace

TEST_CASE("Qwen2.5-0.5B config: biases come with the family, use_sliding_window false means no window") {
  const temp_dir dir;
  const auto c = load(dir, qwen25_config);
  CHECK(c.family() == model_family::qwen2);
  CHECK(c.head_dim == 64);
  CHECK(c.sliding_window == 0);
  CHECK(c.tie_word_embeddings);
  check_round_trip(c);
  std::string sliding = qwen25_config;
  sliding.replace(sliding.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  CHECK(error_of([&] { load(dir, sliding); }) ==
        (dir / "config.json").string() + ": field 'use_sliding_window' true is not supported");
}

TEST_CASE("gemma-2-2b config: soft-caps, alternating windows, tied by default") {
  const temp_dir dir;
  const auto c = load(dir, gemma2_config);
  CHECK(c.family() == model_family::gemma2);
  CHECK(c.hidden_act == "gelu_pytorch_tanh");
  CHECK(c.attn_logit_softcapping == 50.0);
  CHECK(c.final_logit_softcapping == 30.0);
  CHECK(c.query_pre_attn_scalar == 256.0);
  CHECK(c.tie_word_embeddings);
  CHECK(c.is_sliding(0));
  CHECK_FALSE(c.is_sliding(1));
  CHECK(c.is_sliding(24));
  CHECK_FALSE(c.is_sliding(25));
  check_round_trip(c);
  std::string silu = gemma2_config;
  silu.replace(silu.find("\"hidden_activation\": \"gelu_pytorch_tanh\""), 40, "\"hidden_activation\": \"silu\"");
  CHECK(error_of([&] { load(dir, silu); }) ==
        (dir / "config.json").string() +
            ": field 'hidden_activation' 'silu' is not supported for Gemma2ForCausalLM (only gelu_pytorch_tanh)");
}

TEST_CASE("Gemma 3 text config nested in text_config: every sixth layer global, local RoPE base") {
  const temp_dir dir;
  const auto c = load(dir, gemma3_config);
  CHECK(c.family() == model_family::gemma3);
  CHECK(c.hidden_size == 1152);
  CHECK(c.num_key_value_heads == 1);
  CHECK(c.sliding_window == 512);
  CHECK(c.rope_local_base_freq == 10000.0);
  CHECK(c.rope_theta == 1000000.0);
  CHECK(c.attn_logit_softcapping == 0.0);
  CHECK(c.eos_token_ids == std::vector<token_id>{1, 106});
  for (std::int64_t l = 0; l < 26; ++l) CHECK(c.is_sliding(l) == ((l + 1) % 6 != 0));
  check_round_trip(c);
}

TEST_CASE("absent fields take transformers' per-family defaults; null means none") {
  const temp_dir dir;
  const std::string sizes = R"("vocab_size": 100, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16)";
  auto c = load(dir, R"({"architectures": ["Gemma2ForCausalLM"], )" + sizes + "}");
  CHECK(c.attn_logit_softcapping == 50.0);
  CHECK(c.final_logit_softcapping == 30.0);
  CHECK(c.query_pre_attn_scalar == 256.0);
  CHECK(c.sliding_window == 4096);
  c = load(dir, R"({"architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": null,
    "final_logit_softcapping": null, )" + sizes + "}");
  CHECK(c.attn_logit_softcapping == 0.0);
  CHECK(c.final_logit_softcapping == 0.0);
  c = load(dir, R"({"architectures": ["Gemma3ForCausalLM"], )" + sizes + "}");
  CHECK(c.rope_theta == 1000000.0);
  CHECK(c.rope_local_base_freq == 10000.0);
  CHECK(c.final_logit_softcapping == 0.0);
  c = load(dir, R"({"architectures": ["MistralForCausalLM"], )" + sizes + "}");
  CHECK(c.sliding_window == 4096);
  c = load(dir, R"({"architectures": ["Phi3ForCausalLM"], )" + sizes + "}");
  CHECK(c.rms_norm_eps == 1e-5);
  CHECK(c.sliding_window == 0);
}

TEST_CASE("Phi-3.5-mini config: longrope with the trained length at the top level") {
  const temp_dir dir;
  std::string text = phi35_config, longs, shorts;
  for (int i = 0; i < 48; ++i) {
    longs += (i ? ", " : "") + std::to_string(1.0 + i);
    shorts += (i ? ", " : "") + std::to_string(1.0 + 0.01 * i);
  }
  text.replace(text.find("LONG"), 4, longs);
  text.replace(text.find("SHORT"), 5, shorts);
  const auto c = load(dir, text);
  CHECK(c.family() == model_family::phi3);
  CHECK(c.head_dim == 96);
  CHECK(c.rope_scaling.type == "longrope");
  CHECK(c.rope_scaling.original_max_position_embeddings == 4096);
  CHECK(c.rope_scaling.factor == 32.0);
  CHECK(c.rope_scaling.long_factor.size() == 48);
  CHECK(c.rope_scaling.short_factor[1] == doctest::Approx(1.01));
  CHECK(c.sliding_window == 262144);
  check_round_trip(c);
  // Phi-3-mini-128k's first name for it.
  auto su = text;
  su.replace(su.find("\"type\": \"longrope\""), 18, "\"type\": \"su\"");
  CHECK(load(dir, su) == c);
  text.replace(text.find(longs), longs.size(), longs + ", 49.0");
  CHECK(error_of([&] { load(dir, text); }) ==
        (dir / "config.json").string() + ": rope_scaling.long_factor has 49 numbers, expected head_dim / 2 = 48");
}

TEST_CASE("every preset's config saves and loads back") {
  for (const auto name : preset_names()) {
    CAPTURE(name);
    check_round_trip(*preset_config(name));
  }
}

TEST_CASE("generation_config.json errors name that file") {
  const temp_dir dir;
  const auto g = (dir / "generation_config.json").string() + ": ";
  CHECK(error_of([&] { load(dir, tinyllama_config, "{\"top_p\": 1.5}"); }) == g + "top_p must be in (0, 1], got 1.5");
  CHECK(error_of([&] { load(dir, tinyllama_config, "{\"temperature\": -1}"); }) ==
        g + "temperature must be 0 or more, got -1");
  CHECK(error_of([&] { load(dir, tinyllama_config, "{\"top_k\": -2}"); }) == g + "field 'top_k' must be -1 or more");
  CHECK(error_of([&] { load(dir, tinyllama_config, "{\"eos_token_id\": [2, 99999]}"); }) ==
        g + "eos_token_id 99999 is outside the vocabulary (vocab_size 32000)");
  CHECK(error_of([&] { load(dir, tinyllama_config, "{\"eos_token_id\": "); }) == g + "not valid JSON");
}

TEST_CASE("save refuses an invalid config and writes HF names") {
  const temp_dir dir;
  model_config c;
  CHECK(error_of([&] { c.save(dir.path()); }) ==
        (dir / "config.json").string() + ": field 'vocab_size' must be positive, got 0");
  c.vocab_size = 10;
  c.hidden_size = 8;
  c.intermediate_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  c.architecture = "MistralForCausalLM";
  c.default_top_k = 5;
  c.save(dir.path());
  const auto text = troupe::test::read_file(dir / "config.json");
  CHECK(text.find("\"architectures\": [\"MistralForCausalLM\"]") != std::string::npos);
  CHECK(text.find("\"model_type\": \"mistral\"") != std::string::npos);
  CHECK(text.find("\"num_key_value_heads\": 1") != std::string::npos);
  CHECK(text.find("\"rms_norm_eps\": 1e-06") != std::string::npos);
  CHECK(text.find("\"rope_scaling\": null") != std::string::npos);
  CHECK(troupe::test::read_file(dir / "generation_config.json") == "{\n  \"top_k\": 5\n}\n");
  CHECK(model_config::load(dir.path()) == c);
}
