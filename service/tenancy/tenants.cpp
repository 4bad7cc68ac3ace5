#include "service/tenancy/tenants.hpp"
#include "base/json_text.hpp"

#include "settings/toml_settings.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace troupe {
namespace {

using settings::fail;

constexpr auto max_i32 = std::int64_t{std::numeric_limits<std::int32_t>::max()};

/// A string, or an array of strings.
auto strings(const toml::node& n, const std::string& path) -> std::vector<std::string> {
  if (n.is_string()) return {n.as_string()->get()};
  if (!n.is_array()) settings::wrong_type(path, "a string or an array of strings", n);
  std::vector<std::string> out;
  std::size_t i = 0;
  for (const auto& e : *n.as_array()) out.push_back(settings::string(e, path + "[" + std::to_string(i++) + "]"));
  return out;
}

auto parse_tier(const std::string& name, settings::table_reader r) -> tenant_tier {
  tenant_tier tier;
  tier.name = name;
  r.integer("priority", tier.priority, -max_i32);
  if (const auto* v = r.at("vtc_weight")) {
    const auto w = v->is_number() ? v->value<double>().value_or(0) : settings::number(*v, r.path("vtc_weight"));
    if (!(w > 0) || !std::isfinite(w)) fail(r.path("vtc_weight"), "must be a number > 0");
    tier.vtc_weight = w;
  }
  r.finish();
  return tier;
}

auto parse_tenant(const std::string& name, settings::table_reader r, const std::vector<tenant_tier>& tiers)
    -> tenant_spec {
  tenant_spec s;
  s.name = name;
  s.tier.name = "standard";
  if (const auto* v = r.at("api_key_sha256")) {
    const auto path = r.path("api_key_sha256");
    std::size_t i = 0;
    for (const auto& hex : strings(*v, path)) {
      const auto d = parse_sha256_hex(hex);
      if (!d)
        fail(path + (v->is_array() ? "[" + std::to_string(i) + "]" : ""),
             "must be 64 hex digits (the SHA-256 of the key: `troupe hash-key`)");
      s.keys.push_back(*d);
      ++i;
    }
  }
  // Caps far past any real quota, so a bucket's arithmetic cannot overflow.
  const auto capped = [&](const char* key, std::int64_t& out, std::int64_t cap) {
    r.integer(key, out, 0);
    if (out > cap) fail(r.path(key), "must be <= " + std::to_string(cap) + ", got " + std::to_string(out));
  };
  capped("requests_per_minute", s.requests_per_minute, std::int64_t{1} << 40);
  capped("tokens_per_minute", s.tokens_per_minute, std::int64_t{1} << 50);
  r.integer("max_concurrent", s.max_concurrent, 0);
  r.integer("max_input_tokens", s.max_input_tokens, 0);
  r.integer("max_output_tokens", s.max_output_tokens, 0);
  if (const auto* v = r.at("models")) {
    if (!v->is_array()) settings::wrong_type(r.path("models"), "an array of strings", *v);
    s.models = strings(*v, r.path("models"));
  }
  std::string tier_name;
  r.text("tier", tier_name);
  if (r.at("prefix_cache_namespace") != nullptr) {
    r.text("prefix_cache_namespace", s.cache_namespace);
    if (s.cache_namespace.empty()) fail(r.path("prefix_cache_namespace"), "must not be empty");
  }
  r.boolean("response_cache", s.response_cache);
  r.finish();
  if (!tier_name.empty()) {
    const auto it = std::find_if(tiers.begin(), tiers.end(), [&](const auto& x) { return x.name == tier_name; });
    if (it != tiers.end()) {
      s.tier = *it;
    } else if (tier_name != "standard") {
      std::string known = "standard";
      for (const auto& x : tiers) known += ", " + x.name;
      fail("tenants." + name + ".tier", "no tier '" + tier_name + "'; known: " + known);
    }
  } else if (const auto it = std::find_if(tiers.begin(), tiers.end(), [](const auto& x) { return x.name == "standard"; });
             it != tiers.end()) {
    s.tier = *it;
  }
  if (s.cache_namespace.empty()) s.cache_namespace = name;
  if (name == "anonymous" && !s.keys.empty())
    fail("tenants.anonymous.api_key_sha256", "the anonymous tenant takes no keys");
  if (name != "anonymous" && s.keys.empty())
    fail("tenants." + name, "needs api_key_sha256 (the SHA-256 of its key: `troupe hash-key`)");
  return s;
}

/// Each sub-table of the table at `key` ([tiers.gold], [tenants.alpha]), by name.
template <class F>
void each_table(settings::table_reader& top, const char* key, F f) {
  const auto* n = top.at(key);
  if (n == nullptr) return;
  if (!n->is_table()) settings::wrong_type(key, "a table", *n);
  for (const auto& [k, v] : *n->as_table()) {
    const auto path = std::string(key) + "." + std::string(k.str());
    if (!v.is_table()) settings::wrong_type(path, "a table", v);
    f(std::string(k.str()), settings::table_reader(*v.as_table(), path));
  }
}

auto read_tenants(const toml::table& root) -> tenants_config {
  tenants_config c;
  settings::table_reader top(root, "");
  top.boolean("allow_anonymous", c.allow_anonymous);
  // Tiers first: tenants name them.
  each_table(top, "tiers", [&](const std::string& name, settings::table_reader r) {
    c.tiers.push_back(parse_tier(name, std::move(r)));
  });
  each_table(top, "tenants", [&](const std::string& name, settings::table_reader r) {
    c.tenants.push_back(parse_tenant(name, std::move(r), c.tiers));
  });
  top.finish();
  // One key, one tenant.
  for (std::size_t a = 0; a < c.tenants.size(); ++a)
    for (std::size_t b = a; b < c.tenants.size(); ++b)
      for (std::size_t i = 0; i < c.tenants[a].keys.size(); ++i)
        for (std::size_t j = a == b ? i + 1 : 0; j < c.tenants[b].keys.size(); ++j)
          if (c.tenants[a].keys[i] == c.tenants[b].keys[j])
            fail("tenants." + c.tenants[b].name + ".api_key_sha256",
                 "a key hash is listed twice (also for tenant '" + c.tenants[a].name + "')");
  return c;
}

} // namespace

auto tenant_spec::allows(std::string_view model) const -> bool {
  return models.empty() || std::find(models.begin(), models.end(), model) != models.end();
}

auto parse_tenants(std::string_view text, std::string_view origin) -> tenants_config {
  const auto root = settings::parse(text, origin);
  // A key's error names the file too: a reload's is logged beside others.
  try {
    return read_tenants(root);
  } catch (const settings::error& e) {
    throw settings::error(std::string(origin) + ": " + e.what());
  }
}

auto load_tenants(const std::filesystem::path& path) -> tenants_config {
  return parse_tenants(settings::read_file(path), path.string());
}

void token_bucket::configure(double capacity, double now_s) {
  if (capacity_ == 0) level_ = capacity; // new (or was unlimited): full
  capacity_ = capacity;
  level_ = std::min(level_, capacity_);
  last_s_ = now_s;
}

void token_bucket::refill(double now_s) {
  if (now_s > last_s_) level_ = std::min(capacity_, level_ + (now_s - last_s_) * capacity_ / 60.0);
  last_s_ = std::max(last_s_, now_s);
}

auto token_bucket::seconds_until(double want) const -> double {
  if (level_ >= want || capacity_ <= 0) return 0;
  return (want - level_) * 60.0 / capacity_;
}

auto format_reset(double s) -> std::string {
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.3gs", std::max(0.0, s));
    return buf;
  }
  const auto total = static_cast<long long>(std::ceil(s));
  const auto h = total / 3600, m = total % 3600 / 60, sec = total % 60;
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%lldh%lldm%llds", h, m, sec);
  else
    std::snprintf(buf, sizeof buf, "%lldm%llds", m, sec);
  return buf;
}

auto steady_now_s() -> double {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

auto tenant_state::spec() const -> std::shared_ptr<const tenant_spec> {
  std::lock_guard lock(mu_);
  return spec_;
}

auto tenant_state::usage() const -> tenant_usage {
  std::lock_guard lock(mu_);
  return usage_;
}

auto tenant_state::in_flight() const -> std::int32_t {
  std::lock_guard lock(mu_);
  return in_flight_;
}

auto tenant_state::usage_json(double now_s) -> std::string {
  std::lock_guard lock(mu_);
  requests_.refill(now_s);
  tokens_.refill(now_s);
  const auto& u = usage_;
  std::string rej;
  for (const auto& [reason, n] : u.rejections) rej += (rej.empty() ? "" : ",") + json_text::quoted(reason) + ":" + std::to_string(n);
  const auto limit = [](double capacity, double level) {
    return capacity > 0 ? std::to_string(static_cast<long long>(std::floor(level))) : std::string("null");
  };
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  return R"({"object":"tenant.usage","tenant":)" + json_text::quoted(name_) + R"(,"tier":)" +
         json_text::quoted(spec_->tier.name) + R"(,"requests":)" + n(u.requests) + R"(,"prompt_tokens":)" +
         n(u.prompt_tokens) + R"(,"completion_tokens":)" + n(u.completion_tokens) + R"(,"total_tokens":)" +
         n(u.prompt_tokens + u.completion_tokens) + R"(,"in_flight":)" + n(in_flight_) + R"(,"rejections":{)" + rej +
         R"(},"response_cache":{"hits":)" + n(u.cache_hits) + R"(,"misses":)" + n(u.cache_misses) +
         R"(},"remaining":{"requests":)" + limit(requests_.capacity(), requests_.level()) + R"(,"tokens":)" +
         limit(tokens_.capacity(), tokens_.level()) + "}}";
}

tenant_ticket::~tenant_ticket() {
  std::lock_guard lock(tenant_->mu_);
  --tenant_->in_flight_;
}

void tenant_ticket::charge_prompt(std::int64_t n, double now_s) {
  std::lock_guard lock(tenant_->mu_);
  tenant_->tokens_.refill(now_s);
  tenant_->tokens_.take(static_cast<double>(n));
  tenant_->usage_.prompt_tokens += n;
}

void tenant_ticket::charge_completion(std::int64_t n, double now_s) {
  std::lock_guard lock(tenant_->mu_);
  tenant_->tokens_.refill(now_s);
  tenant_->tokens_.take(static_cast<double>(n));
  tenant_->usage_.completion_tokens += n;
}

void tenant_ticket::reject(const std::string& reason) {
  std::lock_guard lock(tenant_->mu_);
  --tenant_->usage_.requests;
  ++tenant_->usage_.rejections[reason];
}

void tenant_ticket::count_cache(bool hit) {
  std::lock_guard lock(tenant_->mu_);
  ++(hit ? tenant_->usage_.cache_hits : tenant_->usage_.cache_misses);
}

tenant_registry::tenant_registry(tenants_config c, double now_s) { reload(std::move(c), now_s); }

void tenant_registry::reload(tenants_config c, double now_s) {
  std::lock_guard lock(mu_);
  std::map<std::string, std::shared_ptr<tenant_state>> next;
  keys_.clear();
  auto specs = c.tenants;
  if (c.allow_anonymous &&
      std::none_of(specs.begin(), specs.end(), [](const auto& s) { return s.name == "anonymous"; })) {
    tenant_spec anon;
    anon.name = anon.cache_namespace = "anonymous";
    anon.tier.name = "standard";
    specs.push_back(anon);
  }
  for (auto& s : specs) {
    auto it = by_name_.find(s.name);
    auto t = it != by_name_.end() ? it->second : std::make_shared<tenant_state>(s);
    {
      std::lock_guard tl(t->mu_);
      t->spec_ = std::make_shared<const tenant_spec>(s);
      t->requests_.configure(static_cast<double>(s.requests_per_minute), now_s);
      t->tokens_.configure(static_cast<double>(s.tokens_per_minute), now_s);
    }
    for (const auto& k : s.keys) keys_.emplace_back(k, t);
    next.emplace(s.name, t);
  }
  by_name_ = std::move(next);
  config_ = std::move(c);
}

auto tenant_registry::config() const -> tenants_config {
  std::lock_guard lock(mu_);
  return config_;
}

auto tenant_registry::authenticate(std::string_view key) const -> std::shared_ptr<tenant_state> {
  std::lock_guard lock(mu_);
  if (key.empty()) {
    if (config_.allow_anonymous)
      if (const auto it = by_name_.find("anonymous"); it != by_name_.end()) return it->second;
    ++unauthenticated_;
    return nullptr;
  }
  const auto d = sha256(key);
  // Every stored hash is compared, in constant time each: how long this
  // takes does not tell which key (or which byte) came close.
  std::shared_ptr<tenant_state> found;
  for (const auto& [k, t] : keys_)
    if (equal_constant_time(k, d)) found = t;
  if (!found) ++unauthenticated_;
  return found;
}

auto tenant_registry::admit(const std::shared_ptr<tenant_state>& t, std::string_view model, double now_s,
                            std::optional<std::int32_t> max_tokens) -> tenant_decision {
  tenant_decision d;
  std::lock_guard lock(t->mu_);
  const auto& s = *t->spec_;
  auto& rq = t->requests_;
  auto& tk = t->tokens_;
  rq.refill(now_s);
  tk.refill(now_s);
  const auto reject = [&](int status, std::string reason, std::string code, std::string message,
                          std::string param = {}) {
    d.status = status;
    d.type = status == 403 ? "permission_error" : status == 429 ? "rate_limit_error" : "invalid_request_error";
    d.param = std::move(param);
    d.reason = std::move(reason);
    d.code = std::move(code);
    d.message = std::move(message);
    ++t->usage_.rejections[d.reason];
  };
  if (!s.allows(model)) {
    std::string allowed;
    for (const auto& m : s.models) allowed += (allowed.empty() ? "'" : ", '") + m + "'";
    reject(403, "model_not_allowed", "model_not_allowed",
           "the tenant '" + t->name_ + "' may not use the model '" + std::string(model) + "'; allowed: " + allowed,
           "model");
  } else if (s.max_output_tokens > 0 && max_tokens && *max_tokens > s.max_output_tokens) {
    reject(400, "max_output_tokens", "output_tokens_exceeded",
           "max_tokens is " + std::to_string(*max_tokens) + "; the tenant's limit (max_output_tokens) is " +
               std::to_string(s.max_output_tokens),
           "max_tokens");
  } else if (s.max_concurrent > 0 && t->in_flight_ >= s.max_concurrent) {
    reject(429, "concurrency", "concurrency_limit_exceeded",
           "the tenant '" + t->name_ + "' has " + std::to_string(t->in_flight_) +
               " requests in flight, its limit (max_concurrent)");
    d.retry_after_s = 1;
  } else if (rq.capacity() > 0 && rq.level() < 1) {
    d.retry_after_s = rq.seconds_until(1);
    reject(429, "requests_per_minute", "rate_limit_exceeded",
           "the tenant '" + t->name_ + "' is over its limit of " + std::to_string(s.requests_per_minute) +
               " requests per minute");
  } else if (tk.capacity() > 0 && tk.level() <= 0) {
    d.retry_after_s = tk.seconds_until(1);
    reject(429, "tokens_per_minute", "rate_limit_exceeded",
           "the tenant '" + t->name_ + "' is over its limit of " + std::to_string(s.tokens_per_minute) +
               " tokens per minute");
  } else {
    if (rq.capacity() > 0) rq.take(1);
    ++t->in_flight_;
    ++t->usage_.requests;
    d.ticket = std::make_shared<tenant_ticket>(t);
  }
  // OpenAI's headers, for each limit the tenant has.
  if (rq.capacity() > 0) {
    d.headers.emplace_back("x-ratelimit-limit-requests", std::to_string(s.requests_per_minute));
    d.headers.emplace_back("x-ratelimit-remaining-requests",
                           std::to_string(static_cast<long long>(std::max(0.0, std::floor(rq.level())))));
    d.headers.emplace_back("x-ratelimit-reset-requests", format_reset(rq.seconds_until(rq.capacity())));
  }
  if (tk.capacity() > 0) {
    d.headers.emplace_back("x-ratelimit-limit-tokens", std::to_string(s.tokens_per_minute));
    d.headers.emplace_back("x-ratelimit-remaining-tokens",
                           std::to_string(static_cast<long long>(std::max(0.0, std::floor(tk.level())))));
    d.headers.emplace_back("x-ratelimit-reset-tokens", format_reset(tk.seconds_until(tk.capacity())));
  }
  if (d.status == 429)
    d.headers.emplace_back("Retry-After", std::to_string(static_cast<long long>(std::max(1.0, std::ceil(d.retry_after_s)))));
  return d;
}

void tenant_registry::count_rejection(tenant_state& t, const std::string& reason) {
  std::lock_guard lock(t.mu_);
  ++t.usage_.rejections[reason];
}

auto tenant_registry::tenants() const -> std::vector<std::shared_ptr<tenant_state>> {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<tenant_state>> out;
  for (const auto& [n, t] : by_name_) out.push_back(t);
  return out;
}

auto tenant_registry::unauthenticated() const -> std::int64_t {
  std::lock_guard lock(mu_);
  return unauthenticated_;
}

} // namespace troupe
