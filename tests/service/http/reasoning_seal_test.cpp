// Sealed reasoning: what one key seals, that key opens; another key, an
// altered text or a stranger's signature opens to nothing.

#include "service/http/reasoning_seal.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

using namespace troupe::api;

TEST_CASE("a sealed text opens with its key, and only with it") {
  const reasoning_seal a, b;
  for (const std::string& text : {std::string(), std::string("x"), std::string("The user asks for 2+2. ✓ 你好\n"),
                                 std::string(5000, 'r')}) {
    const auto sealed = a.seal(text);
    CHECK(sealed.starts_with("trp1."));
    if (text.size() > 4) CHECK(sealed.find(text.substr(0, 4)) == std::string::npos); // (not readable)
    CHECK(a.open(sealed) == text);
    CHECK_FALSE(b.open(sealed).has_value());
    CHECK(a.seal(text) != sealed); // (a fresh nonce each time)
  }
  auto sealed = a.seal("secret reasoning");
  sealed[sealed.size() / 2] = sealed[sealed.size() / 2] == 'A' ? 'B' : 'A';
  CHECK_FALSE(a.open(sealed).has_value());
  for (const std::string& stranger : std::initializer_list<std::string>{"", "trp1.", "trp1.!!!!", "EqQKCAgHE...", "trp1.AAAA", "sig_from_claude"})
    CHECK_FALSE(a.open(stranger).has_value());
}

TEST_CASE("each tenant's derived key opens its own sealed texts only") {
  const reasoning_seal server;
  const auto a = server.derive("tenant-a"), a2 = server.derive("tenant-a"), b = server.derive("tenant-b");
  CHECK(a2.open(a.seal("mine")) == "mine");
  CHECK_FALSE(b.open(a.seal("mine")).has_value());
  CHECK_FALSE(server.open(a.seal("mine")).has_value());
}

TEST_CASE("a key file: 64 hex digits, shared by servers; a bad one is refused naming the file") {
  const auto dir = std::filesystem::temp_directory_path() / "troupe_seal_test";
  std::filesystem::create_directories(dir);
  const auto good = (dir / "good.key").string(), bad = (dir / "bad.key").string();
  std::ofstream(good) << std::string(32, 'a') + std::string(32, '7') << "\n";
  std::ofstream(bad) << "not hex\n";
  const auto one = reasoning_seal::from_file(good), two = reasoning_seal::from_file(good);
  CHECK(two.open(one.seal("shared")) == "shared");
  CHECK_THROWS_WITH_AS((void)reasoning_seal::from_file(bad), doctest::Contains("bad.key"), std::runtime_error);
  CHECK_THROWS_WITH_AS((void)reasoning_seal::from_file((dir / "missing.key").string()), doctest::Contains("missing.key"),
                       std::runtime_error);
  std::filesystem::remove_all(dir);
}
