// The worker port's gate protocol: the handshake both ways (whole and byte
// by byte), a wrong secret, strangers' bytes, truncated and oversized
// messages, and the BASP frame bound, with the exact reproduction.
#include "service/fleet/gate_protocol.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using namespace troupe;
using namespace troupe::fleet;

namespace {

const std::string secret = "the fleet's secret: s3cr3t-0123456789";

auto nonce_of(std::uint8_t seed) -> gate_nonce {
  gate_nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(seed * 31 + i);
  return n;
}

auto bytes(std::span<const std::uint8_t> s) -> std::vector<std::uint8_t> { return {s.begin(), s.end()}; }

// Feeds `data` to a side one piece of `step` bytes at a time (its last status).
template <class Side>
auto feed_in_steps(Side& side, const std::vector<std::uint8_t>& data, std::size_t step) -> gate_status {
  auto status = side.status();
  for (std::size_t at = 0; at < data.size(); at += step)
    status = side.feed(std::span(data).subspan(at, std::min(step, data.size() - at)));
  return status;
}

// A BASP header: operation, payload length (big-endian at bytes 4..7), the rest zero.
auto header(std::uint8_t op, std::uint32_t len) -> std::vector<std::uint8_t> {
  std::vector<std::uint8_t> h(32, 0);
  h[0] = op;
  h[4] = static_cast<std::uint8_t>(len >> 24);
  h[5] = static_cast<std::uint8_t>(len >> 16);
  h[6] = static_cast<std::uint8_t>(len >> 8);
  h[7] = static_cast<std::uint8_t>(len);
  return h;
}

} // namespace

TEST_CASE("the handshake opens both ways when both know the secret, in any split") {
  for (const std::size_t step : {std::size_t{1}, std::size_t{3}, std::size_t{100}}) {
    gate_server router(secret, nonce_of(1));
    gate_client worker(secret, nonce_of(2));
    const auto hello = router.hello();
    CHECK(hello.size() == gate_hello_bytes);
    CHECK(std::string(hello.begin(), hello.begin() + 4) == "TRPG");
    CHECK(feed_in_steps(worker, {hello.begin(), hello.end()}, step) == gate_status::send);
    const auto answer = bytes(worker.out());
    CHECK(answer.size() == gate_answer_bytes);
    CHECK(router.want() == gate_answer_bytes);
    CHECK(feed_in_steps(router, answer, step) == gate_status::open);
    CHECK(router.want() == 0);
    const auto verdict = bytes(router.out());
    CHECK(verdict.size() == gate_verdict_bytes);
    CHECK(verdict[0] == static_cast<std::uint8_t>(gate_verdict::open));
    CHECK(feed_in_steps(worker, verdict, step) == gate_status::open);
    CHECK(worker.want() == 0);
  }
}

TEST_CASE("a wrong secret is refused, and the worker learns that retrying cannot help") {
  gate_server router(secret, nonce_of(1));
  gate_client worker("not the fleet's secret, 32 bytes", nonce_of(2));
  const auto hello = router.hello();
  REQUIRE(worker.feed(hello) == gate_status::send);
  CHECK(router.feed(worker.out()) == gate_status::refused);
  CHECK(std::string(router.why()).find("worker_secret_file") != std::string::npos);
  CHECK(router.out()[0] == static_cast<std::uint8_t>(gate_verdict::wrong_secret));
  CHECK(worker.feed(router.out()) == gate_status::refused);
  CHECK(worker.permanent());
  CHECK(std::string(worker.why()).find("wrong credentials") != std::string::npos);
}

TEST_CASE("a proof is good for its nonces only (no replay)") {
  gate_server first(secret, nonce_of(1));
  gate_client worker(secret, nonce_of(2));
  REQUIRE(worker.feed(first.hello()) == gate_status::send);
  const auto answer = bytes(worker.out());
  CHECK(first.feed(answer) == gate_status::open);
  gate_server second(secret, nonce_of(3));
  CHECK(second.feed(answer) == gate_status::refused);
}

TEST_CASE("the router refuses a stranger's bytes at the first wrong one") {
  // The reproduction: \x00\x00\x00\x10 and 2 MB.
  gate_server router(secret, nonce_of(1));
  const std::vector<std::uint8_t> stranger = {0x00, 0x00, 0x00, 0x10};
  CHECK(router.feed(std::span(stranger).first(1)) == gate_status::failed);
  CHECK(router.want() == 0);
  CHECK(router.feed(stranger) == gate_status::failed); // and stays so
  // A TLS ClientHello's first bytes, an HTTP request: the same.
  for (const std::string s : {"\x16\x03\x01\x02\x00", "GET / HTTP/1.1\r\n"}) {
    gate_server r(secret, nonce_of(1));
    CHECK(r.feed(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size())) == gate_status::failed);
  }
}

TEST_CASE("truncated and oversized messages") {
  gate_server router(secret, nonce_of(1));
  gate_client worker(secret, nonce_of(2));
  const auto hello = router.hello();
  CHECK(worker.feed(std::span(hello).first(gate_hello_bytes - 1)) == gate_status::more);
  CHECK(worker.want() == 1);
  CHECK(worker.feed(std::span(hello).last(1)) == gate_status::send);
  const auto answer = bytes(worker.out());
  CHECK(router.feed(std::span(answer).first(gate_answer_bytes - 1)) == gate_status::more);
  CHECK(router.want() == 1);
  // More than the answer in one feed: the router never takes more than want().
  std::vector<std::uint8_t> longer(answer.end() - 1, answer.end());
  longer.push_back(0);
  CHECK(router.feed(longer) == gate_status::failed);

  gate_client w2(secret, nonce_of(2));
  std::vector<std::uint8_t> long_hello(hello.begin(), hello.end());
  long_hello.push_back(0);
  CHECK(w2.feed(long_hello) == gate_status::failed);
}

TEST_CASE("the worker refuses a router that is not one") {
  gate_server router(secret, nonce_of(1));
  auto hello = router.hello();
  SUBCASE("another magic") {
    hello[0] = 'X';
    gate_client worker(secret, nonce_of(2));
    CHECK(worker.feed(hello) == gate_status::failed);
    CHECK_FALSE(worker.permanent());
  }
  SUBCASE("another version: retrying cannot help") {
    hello[4] = gate_version + 1;
    gate_client worker(secret, nonce_of(2));
    CHECK(worker.feed(hello) == gate_status::failed);
    CHECK(worker.permanent());
  }
  SUBCASE("open without the router's proof") {
    gate_client worker(secret, nonce_of(2));
    REQUIRE(worker.feed(hello) == gate_status::send);
    std::vector<std::uint8_t> verdict(gate_verdict_bytes, 0); // "open", a zero proof
    CHECK(worker.feed(verdict) == gate_status::failed);
    CHECK(std::string(worker.why()).find("could not prove") != std::string::npos);
  }
  SUBCASE("a verdict of no kind") {
    gate_client worker(secret, nonce_of(2));
    REQUIRE(worker.feed(hello) == gate_status::send);
    std::vector<std::uint8_t> verdict(gate_verdict_bytes, 0);
    verdict[0] = 0x77;
    CHECK(worker.feed(verdict) == gate_status::failed);
  }
}

TEST_CASE("the router refuses a worker of another version") {
  gate_server router(secret, nonce_of(1));
  gate_client worker(secret, nonce_of(2));
  REQUIRE(worker.feed(router.hello()) == gate_status::send);
  auto answer = bytes(worker.out());
  answer[4] = gate_version + 1;
  CHECK(router.feed(answer) == gate_status::refused);
  CHECK(router.out()[0] == static_cast<std::uint8_t>(gate_verdict::wrong_version));
  CHECK(worker.feed(router.out()) == gate_status::refused);
  CHECK(worker.permanent());
}

TEST_CASE("basp_guard: frames within the bound pass in any split; one over it stops the stream") {
  const std::uint32_t bound = 1024;
  std::vector<std::uint8_t> stream;
  for (std::uint32_t len : {0u, 5u, bound, 0u, 100u}) {
    const auto h = header(static_cast<std::uint8_t>(len % 7), len);
    stream.insert(stream.end(), h.begin(), h.end());
    stream.insert(stream.end(), len, 0xab); // (payload bytes are never read as headers)
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    basp_guard guard(bound);
    for (std::size_t at = 0; at < stream.size();) {
      const auto n = std::min<std::size_t>(1 + rng() % 64, stream.size() - at);
      REQUIRE(guard.feed(std::span(stream).subspan(at, n)));
      at += n;
    }
  }
  auto bad = stream;
  const auto over = header(2, bound + 1);
  bad.insert(bad.end(), over.begin(), over.end());
  basp_guard guard(bound);
  CHECK(guard.feed(std::span(bad).first(stream.size() + 31))); // the bad header is not whole yet
  CHECK_FALSE(guard.feed(std::span(bad).last(1)));
  CHECK(std::string(guard.why()).find("bound") != std::string::npos);
  const std::vector<std::uint8_t> more(32, 0);
  CHECK_FALSE(guard.feed(more)); // and ever after
}

TEST_CASE("basp_guard: the issue's reproduction and operations BASP does not have") {
  // \x00\x00\x00\x10 then 2 MB, as a BASP stream: a header of operation 0
  // whose payload_len comes from the stranger's bytes.
  std::vector<std::uint8_t> repro = {0x00, 0x00, 0x00, 0x10};
  repro.resize(2u << 20, 0x41);
  basp_guard guard;
  CHECK_FALSE(guard.feed(repro));
  CHECK(basp_guard(basp_guard::default_max_payload_bytes).feed(header(6, 0)));
  CHECK_FALSE(basp_guard().feed(header(7, 0)));
  CHECK_FALSE(basp_guard().feed(header(0xff, 0)));
  CHECK(basp_guard().feed(header(2, basp_guard::default_max_payload_bytes)));
  CHECK_FALSE(basp_guard().feed(header(2, basp_guard::default_max_payload_bytes + 1)));
}
