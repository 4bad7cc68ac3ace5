#pragma once
// Rotary position embedding tables for every RoPE scaling type the config
// reader accepts: none, linear, llama3, dynamic NTK, YaRN and LongRoPE
// (transformers' modeling_rope_utils.py).
//
// dynamic and longrope change with the sequence's length in transformers
// (recomputed each forward from its longest position). Here a token's
// rotation depends on its own position only, as transformers computes it
// when the sequence grows one token at a time: a token at position p uses the
// frequencies of a sequence of length p + 1. So a token's keys never change
// once cached, and a sequence's logits are the same alone or in any batch.

#include "engine/model/model_config.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

class rotary_embedding {
public:
  /// The config's rope_theta and rope_scaling.
  explicit rotary_embedding(const model_config& c);
  /// Another base, no scaling (Gemma 3's sliding layers).
  rotary_embedding(const model_config& c, double theta);

  /// cos/sin of position · θ_i, times the attention factor (YaRN, LongRoPE),
  /// for each row: [num_rows, head_dim/2] each.
  void tables(const std::int32_t* positions, std::int64_t num_rows, std::vector<float>& cos,
              std::vector<float>& sin) const;

private:
  void frequencies_at(std::int32_t position, std::vector<double>& out) const;

  model_config c_;                    ///< theta and scaling as used
  std::vector<double> inv_freq_;      ///< up to switch_position_ (longrope: short factors)
  std::vector<double> long_inv_freq_; ///< longrope, from switch_position_ on
  std::int64_t switch_position_;      ///< first position that does not use inv_freq_
  double attention_factor_ = 1.0;
};

} // namespace troupe
