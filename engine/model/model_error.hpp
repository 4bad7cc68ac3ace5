#pragma once

#include <stdexcept>
#include <string>

namespace troupe {

/// Thrown at start-up when a model directory cannot be used. The message names
/// the file and the problem in one line, e.g.
/// "model.safetensors: header length 9000 exceeds file size 120".
struct model_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

} // namespace troupe
