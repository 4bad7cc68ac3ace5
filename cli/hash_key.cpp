// troupe hash-key: what goes in a tenants file for an API key.
#include "service/tenancy/sha256.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

namespace troupe::cli {

auto run_hash_key(std::span<char* const> argv) -> int {
  const bool make_new = args(argv, {}, {"new"}).has("new");
  std::string key;
  if (make_new) {
    // 24 random bytes as 48 hex digits, from the kernel's generator.
    std::ifstream random("/dev/urandom", std::ios::binary);
    unsigned char bytes[24];
    if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
      std::fputs("troupe hash-key: cannot read /dev/urandom\n", stderr);
      return 1;
    }
    key = "tr-";
    static constexpr char digits[] = "0123456789abcdef";
    for (auto b : bytes) {
      key += digits[b >> 4];
      key += digits[b & 15];
    }
    std::printf("key: %s\n", key.c_str());
  } else if (!std::getline(std::cin, key) || key.empty()) {
    std::fputs("troupe hash-key: give the key on standard input (one line), or --new\n", stderr);
    return 2;
  }
  if (!key.empty() && key.back() == '\r') key.pop_back();
  std::printf("api_key_sha256 = \"%s\"\n", to_hex(sha256(key)).c_str());
  return 0;
}

} // namespace troupe::cli
