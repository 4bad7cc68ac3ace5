#pragma once
// Built-in model shapes: `tiny` for CI and the default server, and the shapes
// of real models (random weights) for benchmarks.

#include "engine/model/model_config.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace troupe {

/// A Llama config with head_dim = hidden / heads, BOS 1 and EOS 2, other
/// fields at their defaults: the base of the presets and of test models.
auto llama_config(std::int64_t vocab, std::int64_t hidden, std::int64_t intermediate,
                  std::int64_t layers, std::int64_t heads, std::int64_t kv_heads) -> model_config;

/// llama_config of another architecture with an explicit head_dim; Gemma's
/// defaults filled in (GeGLU, tied head, query_pre_attn_scalar = head_dim,
/// a 4096 window on Gemma 2's even layers or on five of Gemma 3's six).
auto family_config(std::string_view architecture, std::int64_t vocab, std::int64_t hidden, std::int64_t inter,
                   std::int64_t layers, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim)
    -> model_config;

/// c with experts: `experts` of width expert_size, per_token a token.
auto with_experts(model_config c, std::int64_t experts, std::int64_t per_token, std::int64_t expert_size,
                  bool norm_topk_prob) -> model_config;

/// tiny, stories110m, tinyllama-1.1b, llama-3.2-1b, llama-3-8b, qwen2.5-0.5b, qwen3-0.6b,
/// gemma-2-2b, gemma-3-1b, smollm2-360m, phi-3.5-mini, mistral-7b-v0.3, mistral-nemo-12b, and the
/// mixtures of experts qwen3-30b-a3b, mixtral-8x7b, olmoe-1b-7b and gpt-oss-20b.
auto preset_names() -> std::vector<std::string_view>;

/// The config of a preset; nullopt for an unknown name.
auto preset_config(std::string_view name) -> std::optional<model_config>;

} // namespace troupe
