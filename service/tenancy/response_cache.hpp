#pragma once
// The exact-repeat response cache: the answer to a deterministic request
// (temperature 0, or a fixed seed) kept so that the same request from the
// same tenant is answered again without the engine. Keys are hashed with the
// tenant's name first, so two tenants never share an entry. Bounded in bytes
// (least recently used goes first) and in age (ttl). Thread-safe.

#include "service/tenancy/sha256.hpp"

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe {

struct cached_response {
  std::vector<std::string> pieces; ///< the text, as it was streamed (one piece per token)
  std::uint8_t finish = 0;         ///< a finish_reason
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;

  auto bytes() const -> std::size_t;
};

class response_cache {
public:
  /// max_bytes: > 0; ttl_s: > 0.
  response_cache(std::size_t max_bytes, double ttl_s) : max_bytes_(max_bytes), ttl_s_(ttl_s) {}

  /// The entry for `key` (tenant and request, see cache_key) not older than
  /// ttl, or nullptr.
  auto get(const sha256_digest& key, double now_s) -> std::shared_ptr<const cached_response>;
  /// Stores (replaces) an entry; drops the least recently used while over
  /// the byte bound. An entry larger than the bound is not kept.
  void put(const sha256_digest& key, cached_response r, double now_s);

  auto entries() const -> std::size_t;
  auto bytes() const -> std::size_t;

  /// The key of a request: the tenant's name, then the request's canonical
  /// text (every field that shapes the answer, the model version among them).
  static auto key(std::string_view tenant, std::string_view canonical_request) -> sha256_digest;

private:
  struct digest_hash {
    auto operator()(const sha256_digest& d) const -> std::size_t {
      std::size_t h;
      static_assert(sizeof h <= sizeof d);
      __builtin_memcpy(&h, d.data(), sizeof h);
      return h;
    }
  };
  struct entry {
    sha256_digest key;
    std::shared_ptr<const cached_response> value;
    double stored_s;
    std::size_t bytes;
  };
  void drop(std::list<entry>::iterator it);

  std::size_t max_bytes_;
  double ttl_s_;
  mutable std::mutex mu_;
  std::list<entry> lru_; ///< most recent first
  std::unordered_map<sha256_digest, std::list<entry>::iterator, digest_hash> index_;
  std::size_t bytes_ = 0;
};

} // namespace troupe
