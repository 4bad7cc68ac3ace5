#pragma once
// SHA-256 (FIPS 180-4), for API keys: the tenants file stores the hash of
// each key, never the key.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe {

using sha256_digest = std::array<std::uint8_t, 32>;

auto sha256(std::string_view data) -> sha256_digest;

/// 64 lower-case hex digits.
auto to_hex(const sha256_digest& d) -> std::string;

/// The digest written as 64 hex digits (either case), else nullopt.
auto parse_sha256_hex(std::string_view hex) -> std::optional<sha256_digest>;

/// Equal, in time that does not depend on where they differ.
auto equal_constant_time(const sha256_digest& a, const sha256_digest& b) -> bool;

/// HMAC-SHA256 (RFC 2104) of `message` under `key`: how a worker proves it
/// knows the fleet's secret without sending it.
auto hmac_sha256(std::string_view key, std::string_view message) -> sha256_digest;

} // namespace troupe
