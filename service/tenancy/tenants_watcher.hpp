#pragma once
// The tenants file's watcher: reads the file again into the tenant registry
// on demand (SIGHUP) and, once watching, whenever its modification time or
// size changes (polled on a thread of its own). Plain C++: nothing here
// knows CAF or Beast.

#include "service/tenancy/tenants.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

namespace troupe {

class tenants_watcher {
public:
  /// `registry` was read from `file` and outlives the watcher. Notes the
  /// file's modification time and size as they are now.
  tenants_watcher(std::string file, tenant_registry& registry);
  /// Stops the thread, if watching.
  ~tenants_watcher();
  tenants_watcher(const tenants_watcher&) = delete;
  auto operator=(const tenants_watcher&) -> tenants_watcher& = delete;

  /// Reads the file again. An invalid file keeps the tenants in force and
  /// logs the key and the reason. `why` names the trigger in the log.
  auto reload(const char* why) -> bool;
  /// Watches the file (every `period`; none when it is not positive) on a
  /// thread of its own, reloading when it changes. Only the first call starts one.
  void watch(std::chrono::milliseconds period);

private:
  std::string file_;
  tenant_registry& registry_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::filesystem::file_time_type seen_mtime_{};
  std::uintmax_t seen_size_ = 0;
};

} // namespace troupe
