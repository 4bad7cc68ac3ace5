#pragma once
// Writes a model directory with seeded random weights: the built-in presets,
// test models of any shape, benchmark models.

#include "base/dtype.hpp"
#include "engine/model/model_config.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace troupe {

struct random_model_options {
  std::uint64_t seed = 1;
  dtype type = dtype::f32;
  /// Multiplies the output projections (o_proj, down_proj): small values keep
  /// the residual stream close to the embedding.
  double residual_scale = 1.0;
  /// Tensors given explicitly (F32 values, HF name → [rows * cols]) instead
  /// of random ones; written in `type`.
  std::map<std::string, std::vector<float>> fixed;
};

/// Writes dir/config.json and dir/model.safetensors (creating dir) with the
/// tensors of the config's family under their HF names (Qwen2's biases,
/// q/k norms, Gemma's four norms a layer, Phi-3's fused projections).
/// Matrices are N(0, 1/cols) so activations stay O(1); norm weights are
/// 1 + N(0, 0.1²) (Gemma's, which scale by 1 + w: N(0, 0.1²)), biases
/// N(0, 0.5²), so they are exercised. Streams tensor by tensor: memory stays small even
/// for an 8B model. Deterministic in (config, options).
void write_random_model(const std::filesystem::path& dir, const model_config& config,
                        const random_model_options& options);

} // namespace troupe
