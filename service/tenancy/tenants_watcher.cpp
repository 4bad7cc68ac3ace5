#include "service/tenancy/tenants_watcher.hpp"

#include <cstdio>
#include <utility>

namespace troupe {

tenants_watcher::tenants_watcher(std::string file, tenant_registry& registry)
  : file_(std::move(file)), registry_(registry) {
  std::error_code ec;
  seen_mtime_ = std::filesystem::last_write_time(file_, ec);
  seen_size_ = std::filesystem::file_size(file_, ec);
}

tenants_watcher::~tenants_watcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

auto tenants_watcher::reload(const char* why) -> bool {
  try {
    auto c = load_tenants(file_);
    const auto n = c.tenants.size();
    registry_.reload(std::move(c), steady_now_s());
    std::fprintf(stderr, "troupe: tenants: reloaded %s (%s): %zu tenant(s)\n", file_.c_str(), why, n);
    return true;
  } catch (const std::exception& e) {
    // (config_error's text names the file, the key and the reason; never a key's value.)
    std::fprintf(stderr, "troupe: tenants: not reloaded (%s): %s; the previous tenants stay in force\n", why, e.what());
    return false;
  }
}

void tenants_watcher::watch(std::chrono::milliseconds period) {
  if (period.count() <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this, period] {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
      std::error_code ec1, ec2;
      const auto mtime = std::filesystem::last_write_time(file_, ec1);
      const auto size = std::filesystem::file_size(file_, ec2);
      if (ec1 || ec2 || (mtime == seen_mtime_ && size == seen_size_)) continue;
      seen_mtime_ = mtime;
      seen_size_ = size;
      reload("the file changed");
    }
  });
}

} // namespace troupe
