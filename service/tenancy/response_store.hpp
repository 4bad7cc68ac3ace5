#pragma once
// The Responses API's store: each stored response's conversation (its input
// after `instructions`, and its answer) and its response object, kept in
// memory so that a later request's previous_response_id continues it, and
// GET /v1/responses/{id} returns it. Entries are per tenant (the key is the
// tenant's name and the id), so a tenant never sees another's. Bounded in
// bytes (least recently used goes first) and in age (ttl). Thread-safe.

#include "engine/tokenizer/chat_template.hpp"

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe {

struct stored_response {
  std::vector<chat_message> conversation; ///< without the instructions
  std::string response_json;              ///< the response object as it was sent

  auto bytes() const -> std::size_t;
};

class response_store {
public:
  /// max_bytes: > 0; ttl_s: > 0.
  response_store(std::size_t max_bytes, double ttl_s);

  /// A fresh id, "resp_" and 32 random hex digits (never one given before).
  auto new_id() -> std::string;
  /// The tenant's response `id` not older than ttl, or nullptr.
  auto get(std::string_view tenant, std::string_view id, double now_s) -> std::shared_ptr<const stored_response>;
  /// Stores a response; drops the least recently used while over the byte
  /// bound. One larger than the bound is not kept.
  void put(std::string_view tenant, std::string_view id, stored_response r, double now_s);
  /// Deletes the tenant's response `id`; false when there is none.
  auto erase(std::string_view tenant, std::string_view id, double now_s) -> bool;

  auto entries() const -> std::size_t;
  auto bytes() const -> std::size_t;

private:
  struct entry {
    std::string key;
    std::shared_ptr<const stored_response> value;
    double stored_s;
    std::size_t bytes;
  };
  static auto key(std::string_view tenant, std::string_view id) -> std::string;
  /// The entry, fresh; an expired one is dropped. Under mu_.
  auto find(const std::string& k, double now_s) -> std::list<entry>::iterator;
  void drop(std::list<entry>::iterator it);

  std::size_t max_bytes_;
  double ttl_s_;
  mutable std::mutex mu_;
  std::mt19937_64 random_; ///< seeded from std::random_device: ids are not guessable
  std::list<entry> lru_;   ///< most recent first
  std::unordered_map<std::string, std::list<entry>::iterator> index_;
  std::size_t bytes_ = 0;
};

} // namespace troupe
