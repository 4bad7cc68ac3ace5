#pragma once
// `troupe make-model`: complete model directories (config.json,
// model.safetensors, tokenizer.model, tokenizer_config.json) for the presets.

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

} // namespace troupe
