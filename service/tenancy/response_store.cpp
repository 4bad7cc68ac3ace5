#include "service/tenancy/response_store.hpp"

#include <cstdio>

namespace troupe {

auto stored_response::bytes() const -> std::size_t {
  std::size_t n = sizeof(*this) + response_json.size();
  for (const auto& m : conversation)
    n += sizeof m + m.role.size() + m.content.size() + m.tool_calls_json.size() + m.tool_call_id.size() + m.name.size() +
         m.reasoning_content.size();
  return n;
}

response_store::response_store(std::size_t max_bytes, double ttl_s) : max_bytes_(max_bytes), ttl_s_(ttl_s) {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device(), device(), device(), device(), device()};
  random_.seed(seed);
}

auto response_store::key(std::string_view tenant, std::string_view id) -> std::string {
  std::string k(tenant);
  k += '\0'; // (no tenant name holds one)
  k += id;
  return k;
}

auto response_store::new_id() -> std::string {
  const std::lock_guard lock(mu_);
  const auto hi = random_(), lo = random_();
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(hi), static_cast<unsigned long long>(lo));
  return "resp_" + std::string(hex);
}

void response_store::drop(std::list<entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  lru_.erase(it);
}

auto response_store::find(const std::string& k, double now_s) -> std::list<entry>::iterator {
  const auto it = index_.find(k);
  if (it == index_.end()) return lru_.end();
  if (now_s - it->second->stored_s > ttl_s_) {
    drop(it->second);
    return lru_.end();
  }
  return it->second;
}

auto response_store::get(std::string_view tenant, std::string_view id, double now_s)
    -> std::shared_ptr<const stored_response> {
  const std::lock_guard lock(mu_);
  const auto it = find(key(tenant, id), now_s);
  if (it == lru_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it);
  return it->value;
}

void response_store::put(std::string_view tenant, std::string_view id, stored_response r, double now_s) {
  const auto size = r.bytes() + tenant.size() + id.size();
  const std::lock_guard lock(mu_);
  auto k = key(tenant, id);
  if (const auto it = index_.find(k); it != index_.end()) drop(it->second);
  if (size > max_bytes_) return;
  // Expired entries at the back go first, then the least recently used.
  // (An expired one elsewhere is refused by get, and dropped when found.)
  while (!lru_.empty() && now_s - lru_.back().stored_s > ttl_s_) drop(std::prev(lru_.end()));
  while (!lru_.empty() && bytes_ + size > max_bytes_) drop(std::prev(lru_.end()));
  lru_.push_front({k, std::make_shared<const stored_response>(std::move(r)), now_s, size});
  index_.emplace(std::move(k), lru_.begin());
  bytes_ += size;
}

auto response_store::erase(std::string_view tenant, std::string_view id, double now_s) -> bool {
  const std::lock_guard lock(mu_);
  const auto it = find(key(tenant, id), now_s);
  if (it == lru_.end()) return false;
  drop(it);
  return true;
}

auto response_store::entries() const -> std::size_t {
  const std::lock_guard lock(mu_);
  return lru_.size();
}

auto response_store::bytes() const -> std::size_t {
  const std::lock_guard lock(mu_);
  return bytes_;
}

} // namespace troupe
