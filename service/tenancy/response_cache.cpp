#include "service/tenancy/response_cache.hpp"

namespace troupe {

auto cached_response::bytes() const -> std::size_t {
  std::size_t n = sizeof(cached_response);
  for (const auto& p : pieces) n += p.size() + sizeof(std::string);
  return n;
}

auto response_cache::key(std::string_view tenant, std::string_view canonical_request) -> sha256_digest {
  std::string k;
  k.reserve(tenant.size() + canonical_request.size() + 16);
  k += std::to_string(tenant.size()); // length-prefixed: no tenant name can run into the request
  k += ':';
  k += tenant;
  k += canonical_request;
  return sha256(k);
}

void response_cache::drop(std::list<entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  lru_.erase(it);
}

auto response_cache::get(const sha256_digest& key, double now_s) -> std::shared_ptr<const cached_response> {
  std::lock_guard lock(mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  if (now_s - it->second->stored_s > ttl_s_) {
    drop(it->second);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

void response_cache::put(const sha256_digest& key, cached_response r, double now_s) {
  const auto size = r.bytes() + sizeof(entry);
  std::lock_guard lock(mu_);
  if (const auto it = index_.find(key); it != index_.end()) drop(it->second);
  if (size > max_bytes_) return;
  lru_.push_front({key, std::make_shared<const cached_response>(std::move(r)), now_s, size});
  index_.emplace(key, lru_.begin());
  bytes_ += size;
  while (bytes_ > max_bytes_) drop(std::prev(lru_.end()));
}

auto response_cache::entries() const -> std::size_t {
  std::lock_guard lock(mu_);
  return index_.size();
}

auto response_cache::bytes() const -> std::size_t {
  std::lock_guard lock(mu_);
  return bytes_;
}

} // namespace troupe
