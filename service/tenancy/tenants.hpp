#pragma once
// Tenants: who may call the API, with which limits. Read from a TOML file
// (config/tenants.example.toml documents every key), reloaded while the
// server runs. Plain C++ with the clock passed in: nothing here knows CAF
// or Beast, and the tests drive time by hand.
//
// API keys are stored as SHA-256 hashes; a presented key is hashed and
// compared with every stored hash in constant time. Keys are never logged
// and never put in a metric label: a tenant is named by its table's name.

#include "service/tenancy/sha256.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {

/// A tier: what a tenant's requests get from the scheduler.
struct tenant_tier {
  std::string name;
  std::int32_t priority = 0; ///< the request priority (larger goes first)
  double vtc_weight = 1.0;   ///< > 0: its share under `vtc` (2 is twice a tenant of weight 1)
  friend auto operator==(const tenant_tier&, const tenant_tier&) -> bool = default;
};

/// One [tenants.NAME] table. 0 means "no limit" for every limit.
struct tenant_spec {
  std::string name;
  std::vector<sha256_digest> keys;       ///< api_key_sha256 (a string or a list: rotation)
  std::int64_t requests_per_minute = 0;
  std::int64_t tokens_per_minute = 0;    ///< prompt + generated tokens
  std::int32_t max_concurrent = 0;
  std::int32_t max_input_tokens = 0;     ///< per request
  std::int32_t max_output_tokens = 0;    ///< per request (also the default max_tokens)
  std::vector<std::string> models;       ///< allowed served names; empty: all
  tenant_tier tier;                      ///< tier = "NAME" ([tiers.NAME]); default "standard" (0, 1.0)
  std::string cache_namespace;           ///< prefix_cache_namespace; default: its own name (isolated)
  bool response_cache = false;           ///< opt in to the exact-repeat response cache

  auto allows(std::string_view model) const -> bool;
  friend auto operator==(const tenant_spec&, const tenant_spec&) -> bool = default;
};

struct tenants_config {
  /// Requests without a key are served as the tenant "anonymous" (its
  /// table, when there is one, gives its limits; it takes no keys).
  bool allow_anonymous = false;
  std::vector<tenant_tier> tiers;
  std::vector<tenant_spec> tenants;
  friend auto operator==(const tenants_config&, const tenants_config&) -> bool = default;
};

/// Reads a tenants file. Throws config_error (service/server_config.hpp) with
/// one line "<file>: <key path>: <reason>", e.g. "t.toml:
/// tenants.acme.requests_per_minute: must be >= 0, got -1". The reason never
/// quotes a key hash's text.
auto load_tenants(const std::filesystem::path& path) -> tenants_config;
auto parse_tenants(std::string_view toml_text, std::string_view origin) -> tenants_config;

/// A token bucket of `capacity` per minute, full at the start. The level
/// may go below zero (tokens charged after the fact): the debt is repaid by
/// refilling before anything is let through again.
class token_bucket {
public:
  void configure(double capacity_per_minute, double now_s);
  void refill(double now_s);
  auto level() const -> double { return level_; }
  auto capacity() const -> double { return capacity_; }
  void take(double n) { level_ -= n; }
  /// Seconds until the level reaches `want` (0 when it has).
  auto seconds_until(double want) const -> double;

private:
  double capacity_ = 0, level_ = 0, last_s_ = 0;
};

/// Counts for the usage view.
struct tenant_usage {
  std::int64_t requests = 0; ///< admitted
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  std::int64_t cache_hits = 0, cache_misses = 0;
  std::map<std::string, std::int64_t> rejections; ///< by reason
};

/// A tenant while the server runs: its spec (replaced on reload) and its
/// live state (kept across reloads, by name).
class tenant_state {
public:
  explicit tenant_state(tenant_spec s) : name_(s.name), spec_(std::make_shared<const tenant_spec>(std::move(s))) {}
  auto name() const -> const std::string& { return name_; }
  /// Its spec now (a reload replaces it, never changes it in place).
  auto spec() const -> std::shared_ptr<const tenant_spec>;
  auto usage() const -> tenant_usage;
  auto in_flight() const -> std::int32_t;
  /// The usage view as JSON (GET /v1/usage).
  auto usage_json(double now_s) -> std::string;

private:
  friend class tenant_registry;
  friend class tenant_ticket;
  std::string name_;
  mutable std::mutex mu_;
  std::shared_ptr<const tenant_spec> spec_;
  token_bucket requests_, tokens_;
  std::int32_t in_flight_ = 0;
  tenant_usage usage_;
};

/// An admitted request's hold on its tenant: one of max_concurrent until it
/// is destroyed, and where its tokens are charged.
class tenant_ticket {
public:
  explicit tenant_ticket(std::shared_ptr<tenant_state> t) : tenant_(std::move(t)) {}
  ~tenant_ticket();
  tenant_ticket(const tenant_ticket&) = delete;
  auto operator=(const tenant_ticket&) -> tenant_ticket& = delete;
  auto tenant() const -> const tenant_state& { return *tenant_; }
  /// Tokens into the tenant's tokens-per-minute bucket and its usage.
  void charge_prompt(std::int64_t n, double now_s);
  void charge_completion(std::int64_t n, double now_s);
  void count_cache(bool hit);
  /// A rejection decided after admission (max_input_tokens: 400): counted
  /// as that, not as a request.
  void reject(const std::string& reason);

private:
  std::shared_ptr<tenant_state> tenant_;
};

/// The answer to "may this request go ahead?".
struct tenant_decision {
  int status = 0;              ///< 0: admitted; else 401, 403, 429 (or 400)
  /// For the error body: OpenAI's type (permission_error, invalid_request_error,
  /// rate_limit_error), the field at fault ("model", "max_tokens" or ""), ...
  std::string type, param, message, code;
  std::string reason;          ///< the rejection's label in the usage view and metrics
  double retry_after_s = 0;    ///< 429
  std::vector<std::pair<std::string, std::string>> headers; ///< x-ratelimit-*, Retry-After
  std::shared_ptr<tenant_ticket> ticket; ///< when admitted
};

class tenant_registry {
public:
  explicit tenant_registry(tenants_config c, double now_s = 0);

  /// Replaces the tenants. A tenant that stays (same name) keeps its live
  /// state: requests in flight, bucket levels (capped to a new capacity), usage.
  void reload(tenants_config c, double now_s);
  auto config() const -> tenants_config;

  /// The tenant of a presented key ("": none given), or nullptr: 401.
  /// Without a key: "anonymous" when allowed.
  auto authenticate(std::string_view key) const -> std::shared_ptr<tenant_state>;

  /// Checks, in this order, the model (403), the asked-for max_tokens
  /// against max_output_tokens (400), max_concurrent and the two buckets
  /// (429); admitted, it takes one request and a place. Rate-limit headers
  /// come either way.
  auto admit(const std::shared_ptr<tenant_state>& t, std::string_view model, double now_s,
             std::optional<std::int32_t> max_tokens = std::nullopt) -> tenant_decision;

  /// Counts a rejection decided elsewhere (token limits: 400).
  static void count_rejection(tenant_state& t, const std::string& reason);
  /// Every tenant, in name order (the admin view).
  auto tenants() const -> std::vector<std::shared_ptr<tenant_state>>;
  auto unauthenticated() const -> std::int64_t;

private:
  mutable std::mutex mu_;
  tenants_config config_;
  std::map<std::string, std::shared_ptr<tenant_state>> by_name_;
  std::vector<std::pair<sha256_digest, std::shared_ptr<tenant_state>>> keys_;
  mutable std::int64_t unauthenticated_ = 0;
};

/// "1.5s", "6m0s", "1h2m3s": OpenAI's x-ratelimit-reset-* format.
auto format_reset(double seconds) -> std::string;

/// The clock the server runs the registry on: the steady clock, in seconds.
auto steady_now_s() -> double;

} // namespace troupe
