#pragma once
// An independent float64 reference for every supported family, written from
// Hugging Face transformers' published definitions (modeling_llama.py,
// modeling_mistral.py, modeling_qwen2.py, modeling_qwen3.py,
// modeling_gemma2.py, modeling_gemma3.py, modeling_phi3.py and
// modeling_rope_utils.py), not from troupe's engine: it reads the checkpoint's
// tensors by their HF names straight from model.safetensors (fused Phi-3
// projections split here, Gemma's 1 + w applied here), recomputes the whole
// sequence without a cache, one loop per equation.
//
// Dynamic NTK and LongRoPE depend on the sequence length in transformers;
// the reference computes them as transformers does when the sequence is fed
// one token at a time through its cache: a token at position p is rotated
// with the frequencies of length p + 1.

#include "base/types.hpp"

#include <filesystem>
#include <span>
#include <vector>

namespace troupe::reference {

/// Logits of every position of `tokens`: [tokens.size(), vocab], row-major,
/// for the model in dir (config.json + model.safetensors).
auto hf_forward(const std::filesystem::path& dir, std::span<const token_id> tokens) -> std::vector<double>;

} // namespace troupe::reference
