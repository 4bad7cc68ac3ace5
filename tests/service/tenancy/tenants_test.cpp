// Tenants: SHA-256, the tenants file, token buckets, admission decisions,
// reload, and the response cache. Time is driven by hand.
#include "service/server_config.hpp"
#include "service/tenancy/response_cache.hpp"
#include "service/tenancy/sha256.hpp"
#include "service/tenancy/tenants.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace troupe;

namespace {

auto header(const tenant_decision& d, const std::string& name) -> std::string {
  for (const auto& [k, v] : d.headers)
    if (k == name) return v;
  return "<none>";
}

auto error_of(const std::string& text) -> std::string {
  try {
    parse_tenants(text, "t.toml");
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

const std::string key_a = "sk-alpha", key_b = "sk-beta";

auto two_tenants(const std::string& extra_a = "", const std::string& extra_b = "") -> std::string {
  return "[tiers.gold]\npriority = 5\nvtc_weight = 3.0\n\n[tenants.alpha]\napi_key_sha256 = \"" + to_hex(sha256(key_a)) +
         "\"\n" + extra_a + "\n[tenants.beta]\napi_key_sha256 = [\"" + to_hex(sha256(key_b)) + "\"]\ntier = \"gold\"\n" +
         extra_b;
}

} // namespace

TEST_CASE("hmac_sha256 matches RFC 4231's test vectors") {
  // Test cases 1, 2, 4 and 6 (a key longer than the block is hashed first).
  CHECK(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  CHECK(to_hex(hmac_sha256(key4, std::string(50, '\xcd'))) ==
        "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  CHECK(to_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("sha256 matches the FIPS 180-4 test vectors") {
  CHECK(to_hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(to_hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // 55, 56 and 64 bytes: the padding's edge cases (one block, two blocks).
  CHECK(to_hex(sha256(std::string(55, 'a'))) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(to_hex(sha256(std::string(56, 'a'))) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(to_hex(sha256(std::string(64, 'a'))) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(to_hex(sha256(std::string(1000000, 'a'))) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  const auto d = sha256("x");
  CHECK(parse_sha256_hex(to_hex(d)) == d);
  CHECK_FALSE(parse_sha256_hex("abc"));
  CHECK_FALSE(parse_sha256_hex(std::string(63, 'a') + "g"));
  CHECK(equal_constant_time(d, sha256("x")));
  CHECK_FALSE(equal_constant_time(d, sha256("y")));
}

TEST_CASE("a tenants file is read with its tiers and defaults") {
  const auto c = parse_tenants(two_tenants("requests_per_minute = 60\nmodels = [\"tiny\"]\nresponse_cache = true\n"),
                               "t.toml");
  REQUIRE(c.tenants.size() == 2);
  CHECK_FALSE(c.allow_anonymous);
  const auto& a = c.tenants[0];
  CHECK(a.name == "alpha");
  CHECK(a.requests_per_minute == 60);
  CHECK(a.tokens_per_minute == 0);
  CHECK(a.tier.name == "standard");
  CHECK(a.tier.vtc_weight == 1.0);
  CHECK(a.cache_namespace == "alpha"); // isolated by default
  CHECK(a.response_cache);
  CHECK(a.allows("tiny"));
  CHECK_FALSE(a.allows("other"));
  const auto& b = c.tenants[1];
  CHECK(b.tier.name == "gold");
  CHECK(b.tier.priority == 5);
  CHECK(b.tier.vtc_weight == 3.0);
  CHECK(b.allows("anything"));
  CHECK_FALSE(b.response_cache);
}

TEST_CASE("a bad tenants file is refused with one line naming the key") {
  CHECK(error_of(two_tenants("requests_per_minute = -1\n")) ==
        "t.toml: tenants.alpha.requests_per_minute: must be >= 0, got -1");
  CHECK(error_of(two_tenants("max_concurent = 3\n")).starts_with("t.toml: tenants.alpha.max_concurent: unknown key; known: "));
  CHECK(error_of(two_tenants("tier = \"platinum\"\n")) ==
        "t.toml: tenants.alpha.tier: no tier 'platinum'; known: standard, gold");
  CHECK(error_of("[tenants.x]\napi_key_sha256 = \"sk-plain-key\"\n") ==
        "t.toml: tenants.x.api_key_sha256: must be 64 hex digits (the SHA-256 of the key: `troupe hash-key`)");
  CHECK(error_of("[tenants.x]\nmodels = []\n") ==
        "t.toml: tenants.x: needs api_key_sha256 (the SHA-256 of its key: `troupe hash-key`)");
  CHECK(error_of("[tenants.x]\napi_key_sha256 = \"" + to_hex(sha256("k")) + "\"\n[tenants.y]\napi_key_sha256 = \"" +
                 to_hex(sha256("k")) + "\"\n") ==
        "t.toml: tenants.y.api_key_sha256: a key hash is listed twice (also for tenant 'x')");
  CHECK(error_of("[tiers.t]\nvtc_weight = 0\n") == "t.toml: tiers.t.vtc_weight: must be a number > 0");
  CHECK(error_of("allow_anonymous = 1\n") == "t.toml: allow_anonymous: expected a boolean, got integer");
  CHECK(error_of("quotas = 1\n") == "t.toml: quotas: unknown key; known: allow_anonymous, tiers, tenants");
  CHECK(error_of("[tenants.anonymous]\napi_key_sha256 = \"" + to_hex(sha256("k")) + "\"\n") ==
        "t.toml: tenants.anonymous.api_key_sha256: the anonymous tenant takes no keys");
  CHECK(error_of("[tenants\n").starts_with("t.toml: line 1, column"));
}

TEST_CASE("keys name tenants; no key is anonymous only when allowed") {
  tenant_registry reg(parse_tenants(two_tenants(), "t.toml"));
  REQUIRE(reg.authenticate(key_a));
  CHECK(reg.authenticate(key_a)->name() == "alpha");
  CHECK(reg.authenticate(key_b)->name() == "beta");
  CHECK_FALSE(reg.authenticate("sk-alph"));
  CHECK_FALSE(reg.authenticate(""));
  CHECK(reg.unauthenticated() == 2);
  reg.reload(parse_tenants("allow_anonymous = true\n" + two_tenants(), "t.toml"), 0);
  REQUIRE(reg.authenticate(""));
  CHECK(reg.authenticate("")->name() == "anonymous");
  CHECK_FALSE(reg.authenticate("sk-wrong")); // a wrong key is never anonymous
}

TEST_CASE("requests per minute: a bucket, with OpenAI's headers and Retry-After") {
  tenant_registry reg(parse_tenants(two_tenants("requests_per_minute = 2\n"), "t.toml"), 100.0);
  const auto a = reg.authenticate(key_a);
  auto d1 = reg.admit(a, "tiny", 100.0);
  CHECK(d1.status == 0);
  CHECK(header(d1, "x-ratelimit-limit-requests") == "2");
  CHECK(header(d1, "x-ratelimit-remaining-requests") == "1");
  CHECK(header(d1, "x-ratelimit-reset-requests") == "30s");
  CHECK(header(d1, "x-ratelimit-limit-tokens") == "<none>"); // no token limit
  auto d2 = reg.admit(a, "tiny", 100.0);
  CHECK(d2.status == 0);
  const auto d3 = reg.admit(a, "tiny", 100.0);
  CHECK(d3.status == 429);
  CHECK(d3.code == "rate_limit_exceeded");
  CHECK(d3.reason == "requests_per_minute");
  CHECK(header(d3, "x-ratelimit-remaining-requests") == "0");
  CHECK(header(d3, "Retry-After") == "30");
  CHECK(header(d3, "x-ratelimit-reset-requests") == "1m0s");
  // 30 s later one request has come back.
  CHECK(reg.admit(a, "tiny", 130.0).status == 0);
  CHECK(reg.admit(a, "tiny", 130.0).status == 429);
  const auto u = a->usage();
  CHECK(u.requests == 3);
  CHECK(u.rejections.at("requests_per_minute") == 2);
}

TEST_CASE("tokens per minute are charged after the fact, and a debt blocks until repaid") {
  tenant_registry reg(parse_tenants(two_tenants("tokens_per_minute = 600\n"), "t.toml"), 0.0);
  const auto a = reg.authenticate(key_a);
  auto d = reg.admit(a, "tiny", 0.0);
  REQUIRE(d.status == 0);
  d.ticket->charge_prompt(500, 0.0);
  d.ticket->charge_completion(400, 0.0); // 900 of 600: 300 in debt
  const auto refused = reg.admit(a, "tiny", 0.0);
  CHECK(refused.status == 429);
  CHECK(refused.reason == "tokens_per_minute");
  CHECK(header(refused, "x-ratelimit-remaining-tokens") == "0");
  CHECK(header(refused, "Retry-After") == "31"); // 301 tokens at 10 per second
  CHECK(reg.admit(a, "tiny", 29.0).status == 429);
  CHECK(reg.admit(a, "tiny", 31.0).status == 0);
  CHECK(a->usage().prompt_tokens == 500);
  CHECK(a->usage().completion_tokens == 400);
}

TEST_CASE("max_concurrent counts live tickets; models outside the list are 403") {
  tenant_registry reg(parse_tenants(two_tenants("max_concurrent = 1\nmodels = [\"tiny\"]\n"), "t.toml"));
  const auto a = reg.authenticate(key_a);
  auto first = reg.admit(a, "tiny", 0);
  REQUIRE(first.status == 0);
  const auto second = reg.admit(a, "tiny", 0);
  CHECK(second.status == 429);
  CHECK(second.code == "concurrency_limit_exceeded");
  CHECK(a->in_flight() == 1);
  first.ticket.reset(); // the request ended
  CHECK(a->in_flight() == 0);
  CHECK(reg.admit(a, "tiny", 0).status == 0);
  const auto other = reg.admit(a, "big", 0);
  CHECK(other.status == 403);
  CHECK(other.message == "the tenant 'alpha' may not use the model 'big'; allowed: 'tiny'");
}

TEST_CASE("max_tokens over max_output_tokens is 400, after the model's 403, before any 429") {
  tenant_registry reg(parse_tenants(two_tenants("max_output_tokens = 8\nmax_concurrent = 1\nmodels = [\"tiny\"]\n"),
                                    "t.toml"));
  const auto a = reg.authenticate(key_a);
  CHECK(reg.admit(a, "big", 0, 9).status == 403);
  const auto d = reg.admit(a, "tiny", 0, 9);
  CHECK(d.status == 400);
  CHECK(d.code == "output_tokens_exceeded");
  CHECK(d.param == "max_tokens");
  CHECK(d.type == "invalid_request_error");
  CHECK(a->usage().rejections.at("max_output_tokens") == 1);
  auto held = reg.admit(a, "tiny", 0, 8);
  CHECK(held.status == 0);
  CHECK(reg.admit(a, "tiny", 0, 9).status == 400); // (not 429: the limit is checked first)
}

TEST_CASE("a reload keeps a staying tenant's state and drops a removed one's keys") {
  tenant_registry reg(parse_tenants(two_tenants("requests_per_minute = 10\n"), "t.toml"), 0);
  const auto a = reg.authenticate(key_a);
  std::vector<tenant_decision> held;
  for (int i = 0; i < 6; ++i) held.push_back(reg.admit(a, "tiny", 0));
  // alpha's limit drops to 3: its bucket is capped, its request in flight stays counted.
  reg.reload(parse_tenants("[tenants.alpha]\napi_key_sha256 = \"" + to_hex(sha256(key_a)) +
                               "\"\nrequests_per_minute = 3\nmax_concurrent = 7\n",
                           "t.toml"),
             0);
  CHECK(reg.authenticate(key_a) == a);
  CHECK(a->in_flight() == 6);
  CHECK(a->usage().requests == 6);
  CHECK(a->spec()->max_concurrent == 7);
  const auto d = reg.admit(a, "tiny", 0);
  CHECK(d.status == 0);
  CHECK(header(d, "x-ratelimit-remaining-requests") == "2"); // min(4 left, 3) - 1
  CHECK_FALSE(reg.authenticate(key_b)); // beta is gone
}

TEST_CASE("the usage view") {
  tenant_registry reg(parse_tenants(two_tenants("requests_per_minute = 10\nmodels = [\"tiny\"]\n"), "t.toml"), 0);
  const auto a = reg.authenticate(key_a);
  auto d = reg.admit(a, "tiny", 0);
  d.ticket->charge_prompt(7, 0);
  d.ticket->charge_completion(3, 0);
  d.ticket->count_cache(false);
  (void)reg.admit(a, "big", 0);
  CHECK(a->usage_json(0) ==
        R"({"object":"tenant.usage","tenant":"alpha","tier":"standard","requests":1,"prompt_tokens":7,)"
        R"("completion_tokens":3,"total_tokens":10,"in_flight":1,"rejections":{"model_not_allowed":1},)"
        R"("response_cache":{"hits":0,"misses":1},"remaining":{"requests":9,"tokens":null}})");
}

TEST_CASE("format_reset writes OpenAI's durations") {
  CHECK(format_reset(0) == "0s");
  CHECK(format_reset(1.5) == "1.5s");
  CHECK(format_reset(59) == "59s");
  CHECK(format_reset(60) == "1m0s");
  CHECK(format_reset(3723) == "1h2m3s");
}

TEST_CASE("the response cache: per tenant, bounded, with a ttl") {
  response_cache cache(4096, 10.0);
  const auto ka = response_cache::key("alpha", "req");
  const auto kb = response_cache::key("beta", "req");
  CHECK(ka != kb); // never shared across tenants
  CHECK(response_cache::key("al", "phareq") != response_cache::key("alpha", "req"));
  cache.put(ka, {{"Hel", "lo"}, 1, 4, 2}, 0);
  const auto hit = cache.get(ka, 5);
  REQUIRE(hit);
  CHECK(hit->pieces == std::vector<std::string>{"Hel", "lo"});
  CHECK(hit->completion_tokens == 2);
  CHECK_FALSE(cache.get(kb, 5));
  CHECK_FALSE(cache.get(ka, 10.5)); // older than the ttl
  CHECK(cache.entries() == 0);
  // Over the byte bound, the least recently used goes.
  for (int i = 0; i < 40; ++i) cache.put(response_cache::key("alpha", std::to_string(i)), {{std::string(100, 'x')}, 1, 1, 1}, 0);
  CHECK(cache.bytes() <= 4096);
  CHECK(cache.get(response_cache::key("alpha", "39"), 1));
  CHECK_FALSE(cache.get(response_cache::key("alpha", "0"), 1));
  cache.put(ka, {{std::string(10000, 'x')}, 1, 1, 1}, 0); // larger than the bound: not kept
  CHECK_FALSE(cache.get(ka, 1));
}
