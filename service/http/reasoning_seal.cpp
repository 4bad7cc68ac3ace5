#include "service/http/reasoning_seal.hpp"

#include "service/tenancy/sha256.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

namespace troupe::api {

namespace {

constexpr std::string_view prefix = "trp1.";
constexpr int nonce_size = 12, tag_size = 16;

using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

auto base64(const std::vector<unsigned char>& bytes) -> std::string {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

auto unbase64(std::string_view text) -> std::optional<std::vector<unsigned char>> {
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<unsigned char> out(3 * text.size() / 4);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t padding = 0; // (EVP_DecodeBlock counts the padding's zero bytes)
  for (auto it = text.rbegin(); it != text.rend() && *it == '=' && padding < 2; ++it) ++padding;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}


} // namespace

reasoning_seal::reasoning_seal() {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) throw std::runtime_error("no random key: OpenSSL's RAND_bytes failed");
}

auto reasoning_seal::from_file(const std::string& path) -> reasoning_seal {
  std::ifstream in(path);
  std::string text;
  if (!in || !(in >> text)) throw std::runtime_error(path + ": cannot read the reasoning key");
  const auto key = parse_sha256_hex(text); // (32 bytes as 64 hex digits, as a digest is written)
  if (!key) throw std::runtime_error(path + ": the reasoning key must be 64 hex digits");
  return reasoning_seal(*key);
}

auto reasoning_seal::derive(std::string_view context) const -> reasoning_seal {
  key_type key{};
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), reinterpret_cast<const unsigned char*>(context.data()),
           context.size(), key.data(), &n) == nullptr || n != key.size())
    throw std::runtime_error("deriving a reasoning key failed (OpenSSL)");
  return reasoning_seal(key);
}

auto reasoning_seal::seal(std::string_view text) const -> std::string {
  std::vector<unsigned char> out(nonce_size + text.size() + tag_size);
  if (RAND_bytes(out.data(), nonce_size) != 1) throw std::runtime_error("no random nonce: OpenSSL's RAND_bytes failed");
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_chacha20_poly1305(), nullptr, key_.data(), out.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out.data() + nonce_size, &n, reinterpret_cast<const unsigned char*>(text.data()),
                        static_cast<int>(text.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), out.data() + nonce_size + n, &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, tag_size, out.data() + nonce_size + text.size()) != 1)
    throw std::runtime_error("sealing the reasoning failed (OpenSSL)");
  return std::string(prefix) + base64(out);
}

auto reasoning_seal::open(std::string_view sealed) const -> std::optional<std::string> {
  if (!sealed.starts_with(prefix)) return std::nullopt;
  auto bytes = unbase64(sealed.substr(prefix.size()));
  if (!bytes || bytes->size() < nonce_size + tag_size) return std::nullopt;
  const auto size = bytes->size() - nonce_size - tag_size;
  std::string text(size, '\0');
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0;
  auto* tag = bytes->data() + nonce_size + size;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_chacha20_poly1305(), nullptr, key_.data(), bytes->data()) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(text.data()), &n, bytes->data() + nonce_size,
                        static_cast<int>(size)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, tag_size, tag) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(text.data()) + n, &n) != 1)
    return std::nullopt;
  return text;
}

} // namespace troupe::api
