#pragma once
// One row's sampling parameters as the device sampler reads them (plain C++:
// the host side builds them in engine/cuda/device_samplers).

#include <cstdint>

namespace troupe::kernels {

struct sampling_row {
  float temperature = 1.0f;
  std::int32_t top_k = 0;  ///< <= 0 or >= vocab: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float uniform = 0.0f;    ///< in [0, 1)
  std::int32_t penalty_first = 0; ///< the row's entries in the penalty lists
  std::int32_t penalty_count = 0;
};

} // namespace troupe::kernels
