#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace troupe {

/// Thrown at start-up when a model directory cannot be used. The message names
/// the file and the problem in one line, e.g.
/// "model.safetensors: header length 9000 exceeds file size 120".
struct model_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws model_error("<file>: <problem>"), the one shape of a start-up error.
[[noreturn]] inline void fail(const std::filesystem::path& file, std::string_view problem) {
  throw model_error(file.string() + ": " + std::string(problem));
}

} // namespace troupe
