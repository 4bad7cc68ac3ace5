#include "service/fleet/gate_protocol.hpp"

#include "service/tenancy/sha256.hpp"

#include <algorithm>

namespace troupe::fleet {
namespace {

constexpr std::array<std::uint8_t, 4> k_hello_magic = {'T', 'R', 'P', 'G'};
constexpr std::array<std::uint8_t, 4> k_answer_magic = {'T', 'R', 'P', 'W'};

// Whether the first `have` bytes of `got` agree with the magic (a wrong
// first byte is known at once: a stranger's connection closes on it).
template <std::size_t N>
auto magic_so_far(const std::array<std::uint8_t, N>& got, std::size_t have, const std::array<std::uint8_t, 4>& magic)
    -> bool {
  return std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(have, 4)),
                    magic.begin());
}

auto nonce_at(std::span<const std::uint8_t> bytes, std::size_t at) -> gate_nonce {
  gate_nonce n{};
  std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), n.size(), n.begin());
  return n;
}

} // namespace

auto gate_proof(std::string_view secret, std::string_view role, const gate_nonce& router_nonce,
                const gate_nonce& worker_nonce) -> std::array<std::uint8_t, 32> {
  std::string message = "troupe gate ";
  message.append(role).append("\n");
  message.append(reinterpret_cast<const char*>(router_nonce.data()), router_nonce.size());
  message.append(reinterpret_cast<const char*>(worker_nonce.data()), worker_nonce.size());
  return hmac_sha256(secret, message);
}

// ---- the router node's half ------------------------------------------------

gate_server::gate_server(std::string_view secret, const gate_nonce& nonce) : secret_(secret), nonce_(nonce) {}

auto gate_server::hello() const -> std::array<std::uint8_t, gate_hello_bytes> {
  std::array<std::uint8_t, gate_hello_bytes> out{};
  std::copy(k_hello_magic.begin(), k_hello_magic.end(), out.begin());
  out[4] = gate_version;
  std::copy(nonce_.begin(), nonce_.end(), out.begin() + 5);
  return out;
}

auto gate_server::feed(std::span<const std::uint8_t> data) -> gate_status {
  if (status_ != gate_status::more) return status_;
  if (data.size() > want()) {
    status_ = gate_status::failed;
    why_ = "it sent more than the handshake before the router's verdict";
    return status_;
  }
  std::copy(data.begin(), data.end(), answer_.begin() + static_cast<std::ptrdiff_t>(have_));
  have_ += data.size();
  if (!magic_so_far(answer_, have_, k_answer_magic)) {
    status_ = gate_status::failed;
    why_ = "it does not speak the gate's protocol";
    return status_;
  }
  if (have_ == answer_.size()) decide();
  return status_;
}

// The whole answer is in: its version, then its proof (compared in constant time).
void gate_server::decide() {
  verdict_.fill(0);
  if (answer_[4] != gate_version) {
    verdict_[0] = static_cast<std::uint8_t>(gate_verdict::wrong_version);
    status_ = gate_status::refused;
    why_ = "it speaks another version of the gate's protocol";
    return;
  }
  const auto worker_nonce = nonce_at(answer_, 5);
  const auto proof = nonce_at(answer_, 5 + gate_nonce_bytes);
  if (!equal_constant_time(gate_proof(secret_, "worker", nonce_, worker_nonce), proof)) {
    verdict_[0] = static_cast<std::uint8_t>(gate_verdict::wrong_secret);
    status_ = gate_status::refused;
    why_ = "its proof does not match router.worker_secret_file";
    return;
  }
  verdict_[0] = static_cast<std::uint8_t>(gate_verdict::open);
  const auto mine = gate_proof(secret_, "router", nonce_, worker_nonce);
  std::copy(mine.begin(), mine.end(), verdict_.begin() + 1);
  status_ = gate_status::open;
}

// ---- the worker's half -----------------------------------------------------

gate_client::gate_client(std::string_view secret, const gate_nonce& nonce) : secret_(secret), nonce_(nonce) {}

auto gate_client::want() const -> std::size_t {
  if (status_ != gate_status::more && status_ != gate_status::send) return 0;
  return (hello_done_ ? gate_verdict_bytes : gate_hello_bytes) - have_;
}

auto gate_client::feed(std::span<const std::uint8_t> data) -> gate_status {
  if (status_ != gate_status::more && status_ != gate_status::send) return status_;
  if (data.size() > want()) {
    status_ = gate_status::failed;
    why_ = "the router node sent more than the handshake";
    return status_;
  }
  status_ = gate_status::more;
  std::copy(data.begin(), data.end(), in_.begin() + static_cast<std::ptrdiff_t>(have_));
  have_ += data.size();
  if (!hello_done_ && !magic_so_far(in_, have_, k_hello_magic)) {
    status_ = gate_status::failed;
    why_ = "the port does not answer as a troupe router node's router.worker_port";
    return status_;
  }
  if (!hello_done_ && have_ == gate_hello_bytes) on_hello();
  else if (hello_done_ && have_ == gate_verdict_bytes) on_verdict();
  return status_;
}

void gate_client::on_hello() {
  if (in_[4] != gate_version) {
    status_ = gate_status::failed;
    permanent_ = true;
    why_ = "the router node speaks another version of the gate's protocol (troupe versions differ)";
    return;
  }
  router_nonce_ = nonce_at(in_, 5);
  std::copy(k_answer_magic.begin(), k_answer_magic.end(), answer_.begin());
  answer_[4] = gate_version;
  std::copy(nonce_.begin(), nonce_.end(), answer_.begin() + 5);
  const auto proof = gate_proof(secret_, "worker", router_nonce_, nonce_);
  std::copy(proof.begin(), proof.end(), answer_.begin() + 5 + gate_nonce_bytes);
  hello_done_ = true;
  have_ = 0;
  status_ = gate_status::send;
}

void gate_client::on_verdict() {
  switch (static_cast<gate_verdict>(in_[0])) {
  case gate_verdict::open: {
    const auto proof = nonce_at(in_, 1);
    if (equal_constant_time(gate_proof(secret_, "router", router_nonce_, nonce_), proof)) {
      status_ = gate_status::open;
    } else {
      status_ = gate_status::failed;
      why_ = "the router node could not prove that it knows the fleet's secret";
    }
    return;
  }
  case gate_verdict::wrong_secret:
    status_ = gate_status::refused;
    permanent_ = true;
    why_ = "wrong credentials: the worker's router.worker_secret_file does not match the router node's";
    return;
  case gate_verdict::wrong_version:
    status_ = gate_status::refused;
    permanent_ = true;
    why_ = "the router node speaks another version of the gate's protocol (troupe versions differ)";
    return;
  }
  status_ = gate_status::failed;
  why_ = "the port does not answer as a troupe router node's router.worker_port";
}

// ---- BASP frames -----------------------------------------------------------

auto basp_guard::feed(std::span<const std::uint8_t> data) -> bool {
  std::size_t at = 0;
  while (ok_ && at < data.size()) {
    const auto left = data.size() - at;
    if (payload_left_ > 0) {
      const auto skip = static_cast<std::size_t>(std::min<std::uint64_t>(payload_left_, left));
      payload_left_ -= skip;
      at += skip;
      continue;
    }
    const auto take = std::min(header_bytes - header_have_, left);
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(at), take,
                header_.begin() + static_cast<std::ptrdiff_t>(header_have_));
    header_have_ += take;
    at += take;
    if (header_have_ < header_bytes) break;
    header_have_ = 0;
    const auto len = static_cast<std::uint32_t>(header_[4]) << 24 | static_cast<std::uint32_t>(header_[5]) << 16 |
                     static_cast<std::uint32_t>(header_[6]) << 8 | static_cast<std::uint32_t>(header_[7]);
    if (header_[0] > max_operation) {
      ok_ = false;
      why_ = "a frame of no BASP operation";
    } else if (len > max_payload_) {
      ok_ = false;
      why_ = "a frame over the bound on a message's size";
    } else {
      payload_left_ = len;
    }
  }
  return ok_;
}

} // namespace troupe::fleet
