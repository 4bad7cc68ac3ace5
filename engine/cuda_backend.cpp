#include "engine/cuda_backend.hpp"

#include <dlfcn.h>

#include <charconv>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace troupe {
namespace {

constexpr int k_abi_version = 1; // engine/cuda/cuda_executor.cpp's troupe_cuda_abi_version

using abi_fn = int (*)();
using make_fn = executor* (*)(const model_weights*, const cuda::cuda_executor_options*, char*, std::size_t);

auto open_library() -> void* {
  std::vector<std::string> tried;
  const auto attempt = [&](const std::string& path) -> void* {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) tried.push_back(dlerror());
    return h;
  };
  if (const char* env = std::getenv("TROUPE_CUDA_LIB"); env != nullptr && *env != '\0') {
    if (void* h = attempt(env)) return h;
    throw std::runtime_error("TROUPE_CUDA_LIB=" + std::string(env) + " cannot be loaded: " + tried.back());
  }
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec)
    if (void* h = attempt((exe.parent_path() / "libtroupe_cuda.so").string())) return h;
  if (void* h = attempt("libtroupe_cuda.so")) return h;
  throw std::runtime_error("the CUDA backend (libtroupe_cuda.so) cannot be loaded: " + tried.back() +
                           " (build on a machine with the CUDA toolkit, or set TROUPE_CUDA_LIB)");
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

auto load_cuda_executor(const model_weights& weights, const cuda::cuda_executor_options& options)
    -> std::unique_ptr<executor> {
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
