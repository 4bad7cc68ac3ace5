// libFuzzer harness: the worker port's gate (service/fleet/gate_protocol)
// on any bytes. The first byte picks a side and how the rest is split:
//   0: the router's handshake fed a peer's bytes,
//   1: a worker's handshake fed a router's bytes (hello, then a verdict),
//   2: basp_guard fed a relayed stream,
//   3: a real handshake whose answer the input corrupts.
// Each checks what must hold whatever comes: a side opens only on a proof
// of the secret; the guard stops where a whole-stream reading says, in any split.

#include "service/fleet/gate_protocol.hpp"
#include "service/tenancy/sha256.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

using namespace troupe;
using namespace troupe::fleet;

namespace {

const std::string k_secret = "the fleet's secret: s3cr3t-0123456789";

void require(bool ok) {
  if (!ok) __builtin_trap();
}

auto nonce_of(std::uint8_t seed) -> gate_nonce {
  gate_nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(seed + 7 * i);
  return n;
}

// Feeds `data` to a side in pieces of 1..`split` bytes, never more than it wants.
template <class Side>
void feed_all(Side& side, std::span<const std::uint8_t> data, std::size_t split, std::span<const std::uint8_t>* fed) {
  std::size_t at = 0;
  while (at < data.size() && side.want() > 0) {
    const auto n = std::min({split, side.want(), data.size() - at});
    (void)side.feed(data.subspan(at, n));
    at += n;
    if (side.status() == gate_status::send) (void)side.out(); // (the worker would send it now)
  }
  if (fed) *fed = data.first(at);
}

void router_side(std::span<const std::uint8_t> data, std::size_t split) {
  const auto nonce = nonce_of(1);
  gate_server router(k_secret, nonce);
  std::span<const std::uint8_t> fed;
  feed_all(router, data, split, &fed);
  require(fed.size() <= gate_answer_bytes);
  if (router.status() != gate_status::open) return;
  // Open: what it took is a good answer to this very nonce.
  gate_nonce worker_nonce{}, proof{};
  std::copy_n(fed.begin() + 5, worker_nonce.size(), worker_nonce.begin());
  std::copy_n(fed.begin() + 5 + gate_nonce_bytes, proof.size(), proof.begin());
  require(equal_constant_time(gate_proof(k_secret, "worker", nonce, worker_nonce), proof));
}

void worker_side(std::span<const std::uint8_t> data, std::size_t split) {
  const auto nonce = nonce_of(2);
  gate_client worker(k_secret, nonce);
  std::span<const std::uint8_t> fed;
  feed_all(worker, data, split, &fed);
  require(fed.size() <= gate_hello_bytes + gate_verdict_bytes);
  if (worker.permanent()) require(worker.status() == gate_status::failed || worker.status() == gate_status::refused);
  if (worker.status() != gate_status::open) return;
  // Open: the verdict carried the router's proof for the hello's nonce.
  gate_nonce router_nonce{}, proof{};
  std::copy_n(fed.begin() + 5, router_nonce.size(), router_nonce.begin());
  std::copy_n(fed.begin() + gate_hello_bytes + 1, proof.size(), proof.begin());
  require(equal_constant_time(gate_proof(k_secret, "router", router_nonce, nonce), proof));
}

// Where a whole-stream reading of `data` finds its first bad header: the
// index of the header's last byte, or data.size() when none.
auto first_bad(std::span<const std::uint8_t> data, std::uint32_t bound) -> std::size_t {
  std::size_t at = 0;
  while (at + basp_guard::header_bytes <= data.size()) {
    const auto* h = data.data() + at;
    const auto len = std::uint32_t{h[4]} << 24 | std::uint32_t{h[5]} << 16 | std::uint32_t{h[6]} << 8 | h[7];
    if (h[0] > basp_guard::max_operation || len > bound) return at + basp_guard::header_bytes - 1;
    at += basp_guard::header_bytes + len;
  }
  return data.size();
}

void guard_side(std::span<const std::uint8_t> data, std::size_t split) {
  const std::uint32_t bound = 4096;
  const auto bad = first_bad(data, bound);
  basp_guard guard(bound);
  for (std::size_t at = 0; at < data.size(); at += split) {
    const auto n = std::min(split, data.size() - at);
    const bool ok = guard.feed(data.subspan(at, n));
    require(ok == (bad >= at + n)); // it stops in the piece holding the bad header's last byte
    if (!ok) return;
  }
}

void corrupted_exchange(std::span<const std::uint8_t> data, std::size_t split) {
  gate_server router(k_secret, nonce_of(3));
  gate_client worker(k_secret, nonce_of(4));
  require(worker.feed(router.hello()) == gate_status::send);
  auto answer = std::string(worker.out().begin(), worker.out().end());
  for (std::size_t i = 0; i + 1 < data.size(); i += 2) answer[data[i] % answer.size()] ^= static_cast<char>(data[i + 1]);
  const std::span bytes(reinterpret_cast<const std::uint8_t*>(answer.data()), answer.size());
  std::span<const std::uint8_t> fed;
  feed_all(router, bytes, split, &fed);
  const bool same = std::equal(worker.out().begin(), worker.out().end(), bytes.begin());
  require((router.status() == gate_status::open) == same);
  if (router.status() == gate_status::open || router.status() == gate_status::refused)
    require(worker.feed(router.out()) == router.status());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto split = std::size_t{1} + data[1] % 80;
  const std::span rest(data + 2, size - 2);
  switch (data[0] % 4) {
  case 0: router_side(rest, split); break;
  case 1: worker_side(rest, split); break;
  case 2: guard_side(rest, split); break;
  default: corrupted_exchange(rest, split); break;
  }
  return 0;
}
