#pragma once
// The CUDA backend, reached at run time: libtroupe_cuda.so is opened with
// dlopen only when a cuda:N device is configured, so troupe runs (and its
// tests pass) on machines with no CUDA driver or toolkit.

#include "engine/cuda/cuda_executor.hpp"
#include "engine/executor.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace troupe {

/// "cuda:N" → N, "cpu" → nullopt; anything else throws std::invalid_argument
/// with a message naming the accepted forms.
auto parse_device(std::string_view name) -> std::optional<int>;

/// Why the CUDA backend cannot run this model, in one line, or "" when it
/// can: it implements Llama-shaped decoders (LlamaForCausalLM,
/// MistralForCausalLM without a window shorter than the context) with no,
/// linear or llama3 RoPE scaling. Compiled everywhere, so that the refusal
/// comes at start-up, before the library is opened.
auto cuda_supports(const model_config& c) -> std::string;

/// Loads the backend (TROUPE_CUDA_LIB, else libtroupe_cuda.so beside the
/// running executable, else the loader's search path) and makes an executor.
/// Throws std::runtime_error in one line: the library cannot be loaded (with
/// dlerror's reason), its ABI differs, the model is one cuda_supports
/// refuses, or the executor cannot be made (no device, out of memory...).
auto load_cuda_executor(const model_weights& weights, const cuda::cuda_executor_options& options)
    -> std::unique_ptr<executor>;

} // namespace troupe
