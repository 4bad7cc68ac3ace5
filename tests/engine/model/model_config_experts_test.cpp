// config.json of the mixtures of experts (Qwen3-MoE, Mixtral, OLMoE,
// gpt-oss): their expert fields, defaults and refusals, against the real
// files of the Hugging Face hub and the presets' shapes.

#include "engine/model/model_config.hpp"
#include "engine/model/presets.hpp"

#include "tests/engine/model/config_test_util.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>

using namespace troupe;
using troupe::test::error_of;
using troupe::test::temp_dir;
using troupe::test::write_file;

namespace {

auto load(const temp_dir& dir, const std::string& config) -> model_config {
  return troupe::test::load_config(dir, config);
}
auto load_error(const temp_dir& dir, std::string_view from, std::string_view to, const std::string& base)
    -> std::string {
  return troupe::test::edited_config_error(dir, from, to, base);
}
using troupe::test::check_round_trip;

} // namespace

namespace {

// The mixtures of experts' config.json files from the Hugging Face hub
// (Qwen/Qwen3-30B-A3B, mistralai/Mixtral-8x7B-v0.1, allenai/OLMoE-1B-7B-0924).
constexpr const char* qwen3_moe_config = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
  "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
})";
constexpr const char* mixtral_config = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
  "use_cache": true, "vocab_size": 32000
})";
constexpr const char* olmoe_config = R"({
  "architectures": ["OlmoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "clip_qkv": null,
  "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 1024, "max_position_embeddings": 4096, "model_type": "olmoe", "norm_topk_prob": false,
  "num_attention_heads": 16, "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 16,
  "num_key_value_heads": 16, "output_router_logits": false, "pad_token_id": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": null, "rope_theta": 10000.0, "router_aux_loss_coef": 0.01, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 50304
})";

// openai/gpt-oss-20b's config.json.
constexpr const char* gpt_oss_config = R"({
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0, "eos_token_id": 200002,
  "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
  "initializer_range": 0.02, "intermediate_size": 2880,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
    "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
    "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
    "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
    "full_attention"],
  "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4,
  "num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false,
  "pad_token_id": 199999,
  "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
    "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
    "rope_type": "yarn", "truncate": false},
  "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
  "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", "use_cache": true, "vocab_size": 201088
})";

} // namespace

TEST_CASE("gpt-oss-20b's config: experts, window on even layers, YaRN untruncated, MXFP4; its preset the same") {
  const temp_dir dir;
  const auto c = load(dir, gpt_oss_config);
  CHECK(c.family() == model_family::gpt_oss);
  CHECK(c.num_experts == 32);
  CHECK(c.num_experts_per_tok == 4);
  CHECK(c.moe_intermediate_size == 2880);
  CHECK(c.swiglu_limit == 7.0);
  CHECK(c.mxfp4_experts);
  CHECK(c.sliding_window == 128);
  CHECK(c.is_sliding(0));
  CHECK_FALSE(c.is_sliding(1));
  CHECK(c.rope_scaling.type == "yarn");
  CHECK_FALSE(c.rope_scaling.truncate);
  auto p = *preset_config("gpt-oss-20b");
  p.eos_token_ids = c.eos_token_ids; // generation_config.json adds <|endoftext|> and <|call|>
  p.bos_token_id = c.bos_token_id;
  p.torch_dtype = c.torch_dtype; // the hub's config names none
  CHECK(p.sliding_layers == c.sliding_layers);
  CHECK(p.rope_scaling == c.rope_scaling);
  CHECK(p.max_position_embeddings == c.max_position_embeddings);
  CHECK(p == c);
  check_round_trip(c);
  const auto q = (dir / "config.json").string() + ": ";
  CHECK(load_error(dir, "\"quant_method\": \"mxfp4\"", "\"quant_method\": \"awq\"", gpt_oss_config) ==
        q + "field 'quantization_config' is not gpt-oss's {\"quant_method\": \"mxfp4\"}");
  CHECK(load_error(dir, "\"hidden_size\": 2880", "\"hidden_size\": 2888", gpt_oss_config) ==
        q + "MXFP4 experts need hidden_size and intermediate_size multiples of 32 (its blocks), got 2888 and 2880");
}

TEST_CASE("the mixtures of experts' configs: experts, their width, renormalisation; the presets their shapes") {
  const temp_dir dir;
  struct expect {
    const char* config;
    const char* preset;
    model_family family;
    std::int64_t experts, per_token, width;
    bool norm;
  };
  for (const auto& e : {expect{qwen3_moe_config, "qwen3-30b-a3b", model_family::qwen3, 128, 8, 768, true},
                        expect{mixtral_config, "mixtral-8x7b", model_family::llama, 8, 2, 14336, true},
                        expect{olmoe_config, "olmoe-1b-7b", model_family::olmoe, 64, 8, 1024, false}}) {
    CAPTURE(e.preset);
    const auto c = load(dir, e.config);
    CHECK(c.family() == e.family);
    CHECK(c.is_moe());
    CHECK(c.num_experts == e.experts);
    CHECK(c.num_experts_per_tok == e.per_token);
    CHECK(c.moe_intermediate_size == e.width);
    CHECK(c.mlp_width() == e.width);
    CHECK(c.norm_topk_prob == e.norm);
    const auto p = *preset_config(e.preset);
    for (const auto& [got, want] : {std::pair{p.num_experts, c.num_experts}, {p.num_experts_per_tok, c.num_experts_per_tok},
                                    {p.moe_intermediate_size, c.moe_intermediate_size}, {p.hidden_size, c.hidden_size},
                                    {p.num_hidden_layers, c.num_hidden_layers}, {p.head_dim, c.head_dim},
                                    {p.num_key_value_heads, c.num_key_value_heads}, {p.vocab_size, c.vocab_size}})
      CHECK(got == want);
    CHECK(p.norm_topk_prob == c.norm_topk_prob);
    check_round_trip(c);
  }
}

TEST_CASE("a mixture of experts troupe does not compute is refused with one line") {
  const temp_dir dir;
  const auto p = (dir / "config.json").string() + ": ";
  CHECK(load_error(dir, "\"mlp_only_layers\": []", "\"mlp_only_layers\": [0, 47]", qwen3_moe_config) ==
        p + "field 'mlp_only_layers' lists dense layers among the expert layers, which are not supported");
  CHECK(load_error(dir, "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2", qwen3_moe_config) ==
        p + "field 'decoder_sparse_step' is 2: dense layers among the expert layers are not supported");
  CHECK(load_error(dir, "\"clip_qkv\": null", "\"clip_qkv\": 8.0", olmoe_config) ==
        p + "field 'clip_qkv' (clamping q, k and v) is not supported");
  CHECK(load_error(dir, "\"num_experts\": 128", "\"shared_expert_intermediate_size\": 5632, \"num_experts\": 128",
                   qwen3_moe_config) == p + "field 'shared_expert_intermediate_size' (shared experts) is not supported");
  CHECK(load_error(dir, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9", mixtral_config) ==
        p + "num_experts_per_tok 9 exceeds num_local_experts 8");
  CHECK(load_error(dir, "\"num_experts\": 64", "\"num_experts\": 0", olmoe_config) ==
        p + "field 'num_experts' must be positive, got 0");
  CHECK(load_error(dir, "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM", qwen3_moe_config)
            .starts_with(p + "unsupported architecture 'Qwen2MoeForCausalLM'"));
  CHECK(load_error(dir, "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM", qwen3_moe_config)
            .starts_with(p + "unsupported architecture 'DeepseekV3ForCausalLM'"));
}
