#include "engine/cuda/cuda_backend.hpp"

#include "install_paths.hpp"

#include <dlfcn.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace troupe {
namespace {

constexpr int k_abi_version = 2; // engine/cuda/cuda_executor.cpp's troupe_cuda_abi_version

using abi_fn = int (*)();
using make_fn = executor* (*)(const model_weights*, const cuda::cuda_executor_options*, char*, std::size_t);

/// TROUPE_CUDA_LIB when set; else libtroupe_cuda.so beside the binary (the
/// build tree), in TROUPE_CUDA_LIB_DIR relative to it (an installed tree),
/// then on the library path.
auto open_library() -> void* {
  const auto open = [](const std::string& path) { return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL); };
  if (const char* env = std::getenv("TROUPE_CUDA_LIB"); env != nullptr && *env != '\0') {
    if (void* h = open(env)) return h;
    throw std::runtime_error("TROUPE_CUDA_LIB=" + std::string(env) + " cannot be loaded: " + dlerror());
  }
  std::string looked;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& dir : {exe.parent_path(), (exe.parent_path() / TROUPE_CUDA_LIB_DIR).lexically_normal()}) {
      const auto path = dir / "libtroupe_cuda.so";
      if (!std::filesystem::exists(path, ec)) {
        looked += (looked.empty() ? "" : ", ") + dir.string();
        continue;
      }
      if (void* h = open(path.string())) return h;
      throw std::runtime_error(path.string() + " cannot be loaded: " + dlerror());
    }
  }
  if (void* h = open("libtroupe_cuda.so")) return h;
  throw std::runtime_error("the CUDA backend (libtroupe_cuda.so) is not in " + (looked.empty() ? "" : looked + " or ") +
                           "the library path (" + dlerror() +
                           "): build on a machine with the CUDA toolkit, or set TROUPE_CUDA_LIB");
}

} // namespace

auto parse_device(std::string_view name) -> std::optional<int> {
  if (name == "cpu") return std::nullopt;
  if (name.starts_with("cuda:")) {
    const auto digits = name.substr(5);
    int n = -1;
    const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (err == std::errc() && end == digits.data() + digits.size() && !digits.empty() && n >= 0) return n;
  }
  throw std::invalid_argument("unknown device \"" + std::string(name) + "\"; known: \"cpu\", \"cuda:N\" (N >= 0)");
}

auto cuda_supports(const model_config& c) -> std::string {
  const auto no = [&](const std::string& what) { return "the CUDA backend does not implement " + what; };
  if (c.is_moe())
    return no("mixture-of-experts models (" + c.architecture + ", " + std::to_string(c.num_experts) +
              " experts; use a cpu device)");
  if (c.family() != model_family::llama)
    return no(c.architecture + " (it runs LlamaForCausalLM and MistralForCausalLM; use a cpu device)");
  if (c.sliding_window > 0 && c.sliding_window < c.max_position_embeddings)
    return no("sliding-window attention (sliding_window " + std::to_string(c.sliding_window) + "; use a cpu device)");
  const auto& t = c.rope_scaling.type;
  if (!t.empty() && t != "linear" && t != "llama3")
    return no("rope_scaling type '" + t + "' (it has linear and llama3; use a cpu device)");
  return {};
}

auto load_cuda_executor(const model_weights& weights, const cuda::cuda_executor_options& options)
    -> std::unique_ptr<executor> {
  if (const auto why = cuda_supports(weights.config); !why.empty()) throw std::runtime_error(why);
  // Quantized matrices (a GGUF file's, or engine.weight_dtype's) have CPU kernels only.
  if (const auto* t = weights.first_quantized())
    throw std::runtime_error("the CUDA backend does not implement " + std::string(t->type_name()) +
                             " weights (use a cpu device)");
  static void* const lib = open_library(); // kept open: the executor's code lives there
  const auto abi = reinterpret_cast<abi_fn>(dlsym(lib, "troupe_cuda_abi_version"));
  const auto make = reinterpret_cast<make_fn>(dlsym(lib, "troupe_cuda_make_executor"));
  if (abi == nullptr || make == nullptr) throw std::runtime_error("libtroupe_cuda.so lacks troupe's entry points");
  if (abi() != k_abi_version)
    throw std::runtime_error("libtroupe_cuda.so speaks ABI " + std::to_string(abi()) + ", this troupe " +
                             std::to_string(k_abi_version) + ": rebuild both together");
  char error[512] = {};
  executor* ex = make(&weights, &options, error, sizeof error);
  if (ex == nullptr) throw std::runtime_error(std::string("cuda:") + std::to_string(options.device) + ": " + error);
  return std::unique_ptr<executor>(ex);
}

} // namespace troupe
