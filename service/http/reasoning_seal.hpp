#pragma once
// A model's reasoning, sealed for a client that stores nothing: Anthropic's
// thinking signature and the Responses API's encrypted_content. The text is
// encrypted and authenticated (ChaCha20-Poly1305, OpenSSL) with the
// server's key, so the client can send it back on the next turn and only a
// server with that key can read it (or forge one).

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::api {

class reasoning_seal {
public:
  using key_type = std::array<unsigned char, 32>;

  /// A fresh random key (the default: sealed texts live as long as the process).
  reasoning_seal();
  explicit reasoning_seal(const key_type& key) : key_(key) {}
  /// The key in a file of 64 hex digits (server.reasoning_key_file), for
  /// servers that open each other's texts; throws std::runtime_error naming
  /// the file and the problem.
  static auto from_file(const std::string& path) -> reasoning_seal;

  /// This key's for one context (a tenant): HMAC-SHA256 of the context
  /// under it. What one tenant's key seals, another's cannot open, so a
  /// sealed text leaked across tenants shows its reasoning to no one.
  auto derive(std::string_view context) const -> reasoning_seal;

  /// "trp1." then base64 of a random 12-byte nonce, the ciphertext and its 16-byte tag.
  auto seal(std::string_view text) const -> std::string;
  /// The text, or nothing when `sealed` is not one of this key's (another
  /// key's, altered, or not a sealed text at all).
  auto open(std::string_view sealed) const -> std::optional<std::string>;

private:
  key_type key_{};
};

} // namespace troupe::api
