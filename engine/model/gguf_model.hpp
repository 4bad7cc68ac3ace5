#pragma once
// A decoder from a GGUF file, llama.cpp's format: the hyper-parameters from
// its metadata ("{arch}.block_count", ...) and its tensors under llama.cpp's
// names ("blk.{i}.attn_q.weight", ...), mapped onto troupe's model_config and
// model_weights as if the file were the Hugging Face checkpoint it was
// converted from. What the conversion changed is undone: Llama's Q/K rows
// permuted for llama.cpp's interleaved RoPE are put back in rotate-half
// order; Gemma's norms already hold 1 + w.

#include "engine/formats/gguf.hpp"
#include "engine/model/model_config.hpp"
#include "engine/model/model_weights.hpp"

#include <filesystem>

namespace troupe {

/// The hyper-parameters of f's model (llama, qwen2, qwen3, gemma2, gemma3,
/// phi3). Throws model_error("<file>: <problem>") for another architecture,
/// a missing or mistyped key, or a value troupe does not implement.
auto gguf_model_config(const gguf::file& f) -> model_config;

/// The weights of a GGUF file, matrices used in place in the mapping (F32,
/// F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K); norms widened to F32 copies;
/// Llama's Q and K copied in HF's row order. Throws model_error for a
/// missing tensor, a wrong shape, a type troupe does not read, or a tensor
/// the architecture does not use.
auto load_gguf_weights(const std::filesystem::path& file) -> model_weights;

/// The same from an opened file and its gguf_model_config: the weights keep
/// the file (and its mapping) alive.
auto load_gguf_weights(std::shared_ptr<const gguf::file> f, model_config config) -> model_weights;

} // namespace troupe
