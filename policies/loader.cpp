#include "policies/loader.hpp"

#include "policies/api/plugin.hpp"

#include <dlfcn.h>

#include <stdexcept>

namespace troupe::policy {
namespace {

template <class Policy>
auto load(const std::string& path, const char* factory, const char* kind) -> std::unique_ptr<Policy> {
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw std::invalid_argument(std::string(kind) + " policy " + path + ": " + ::dlerror());
  const auto version = reinterpret_cast<troupe_policy_abi_version_fn>(::dlsym(lib, "troupe_policy_abi_version"));
  const auto make = reinterpret_cast<Policy* (*)()>(::dlsym(lib, factory));
  if (version == nullptr || make == nullptr) {
    ::dlclose(lib);
    throw std::invalid_argument(std::string(kind) + " policy " + path + ": exports no troupe_policy_abi_version or " +
                                factory);
  }
  if (const int v = version(); v != abi_version) {
    ::dlclose(lib);
    throw std::invalid_argument(std::string(kind) + " policy " + path + ": built against policy ABI " +
                                std::to_string(v) + ", this troupe has " + std::to_string(abi_version));
  }
  std::unique_ptr<Policy> p(make());
  if (!p) throw std::invalid_argument(std::string(kind) + " policy " + path + ": " + factory + " returned null");
  return p; // the library stays loaded: the object's code lives there
}

} // namespace

auto load_scheduling_policy(const std::string& path) -> std::unique_ptr<scheduling_policy> {
  return load<scheduling_policy>(path, "troupe_make_scheduling_policy", "scheduling");
}

auto load_eviction_policy(const std::string& path) -> std::unique_ptr<eviction_policy> {
  return load<eviction_policy>(path, "troupe_make_eviction_policy", "eviction");
}

auto load_routing_policy(const std::string& path) -> std::unique_ptr<routing_policy> {
  return load<routing_policy>(path, "troupe_make_routing_policy", "routing");
}

auto names_a_library(const std::string& name) -> bool { return name.find('/') != std::string::npos; }

} // namespace troupe::policy
