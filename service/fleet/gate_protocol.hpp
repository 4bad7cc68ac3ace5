#pragma once
// The worker port's gate, as plain C++: what a router node and a worker say
// before any byte reaches CAF's BASP (a mutual proof of the fleet's secret),
// and the check of each BASP frame after it. Bytes in, a verdict out: no I/O,
// no allocation that a peer sizes, no exception on any input, so that a
// fuzzer drives it (tests/fuzz/worker_gate_fuzz.cpp).
//
// The handshake, every message of a fixed size:
//   router -> worker  hello:   "TRPG", version, the router's nonce (32)
//   worker -> router  answer:  "TRPW", version, the worker's nonce (32),
//                              HMAC-SHA256(secret, "troupe gate worker\n" || both nonces)
//   router -> worker  verdict: open | wrong_secret | wrong_version,
//                              HMAC-SHA256(secret, "troupe gate router\n" || both nonces) (zeros unless open)
// then both relay BASP. The router's proof tells the worker that it reached
// a node that knows the secret; the nonces make each proof single-use.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace troupe::fleet {

inline constexpr std::uint8_t gate_version = 1;
inline constexpr std::size_t gate_nonce_bytes = 32;
inline constexpr std::size_t gate_hello_bytes = 4 + 1 + gate_nonce_bytes;
inline constexpr std::size_t gate_answer_bytes = 4 + 1 + gate_nonce_bytes + 32;
inline constexpr std::size_t gate_verdict_bytes = 1 + 32;

using gate_nonce = std::array<std::uint8_t, gate_nonce_bytes>;

/// The router's last word in the handshake.
enum class gate_verdict : std::uint8_t { open = 0, wrong_secret = 1, wrong_version = 2 };

/// Where a side's handshake stands after its last feed:
///   more -> (send ->) more -> open | refused | failed
enum class gate_status : std::uint8_t {
  more,    ///< wants more bytes: want() of them at most
  send,    ///< (worker) send out(), then feed the router's verdict
  open,    ///< done: (router: send out() first) relay from now on
  refused, ///< router: send out() (the verdict), then close; worker: the router refused (why())
  failed,  ///< close: the peer does not speak the gate's protocol, or could not prove the secret (why())
};

/// The router node's half of one connection's handshake. Send hello(),
/// then feed() what the worker sends, in any split, never more than want().
class gate_server {
public:
  /// `secret`: the fleet's (kept by reference: it outlives the handshake);
  /// `nonce`: fresh random bytes, never used again.
  gate_server(std::string_view secret, const gate_nonce& nonce);

  auto hello() const -> std::array<std::uint8_t, gate_hello_bytes>;
  /// How many bytes the next feed may hold (0 once decided).
  auto want() const -> std::size_t { return status_ == gate_status::more ? answer_.size() - have_ : 0; }
  /// The worker's next bytes; a wrong magic fails as soon as its 4 bytes are in.
  [[nodiscard]] auto feed(std::span<const std::uint8_t> data) -> gate_status;
  auto status() const -> gate_status { return status_; }
  /// The verdict to send (after open or refused).
  auto out() const -> std::span<const std::uint8_t> { return verdict_; }
  /// Why it refused or failed, for the router node's log.
  auto why() const -> std::string_view { return why_; }

private:
  void decide();
  std::string_view secret_;
  gate_nonce nonce_;
  std::array<std::uint8_t, gate_answer_bytes> answer_{};
  std::size_t have_ = 0;
  std::array<std::uint8_t, gate_verdict_bytes> verdict_{};
  gate_status status_ = gate_status::more;
  std::string_view why_;
};

/// A worker's half: feed() the router's hello; on send, send out() and feed
/// the router's verdict; open when the router proved the secret too.
class gate_client {
public:
  /// `nonce`: the worker's fresh random bytes.
  gate_client(std::string_view secret, const gate_nonce& nonce);

  auto want() const -> std::size_t;
  [[nodiscard]] auto feed(std::span<const std::uint8_t> data) -> gate_status;
  auto status() const -> gate_status { return status_; }
  /// The answer to send (after send).
  auto out() const -> std::span<const std::uint8_t> { return answer_; }
  /// Why the router refused or the handshake failed, in words for the worker's one line.
  auto why() const -> std::string_view { return why_; }
  /// Whether a retry cannot help (a wrong secret, another version).
  auto permanent() const -> bool { return permanent_; }

private:
  void on_hello();
  void on_verdict();
  std::string_view secret_;
  gate_nonce nonce_;
  gate_nonce router_nonce_{};
  std::array<std::uint8_t, gate_hello_bytes> in_{}; ///< the message being read (a verdict fits)
  std::size_t have_ = 0;
  bool hello_done_ = false;
  std::array<std::uint8_t, gate_answer_bytes> answer_{};
  gate_status status_ = gate_status::more;
  std::string_view why_;
  bool permanent_ = false;
};

/// The proofs: HMAC-SHA256 under the secret of a role's label and both nonces.
auto gate_proof(std::string_view secret, std::string_view role, const gate_nonce& router_nonce,
                const gate_nonce& worker_nonce) -> std::array<std::uint8_t, 32>;

/// Checks the BASP frames of one direction of a relayed stream before their
/// bytes go on (caf/io/basp/header.hpp: a 32-byte big-endian header,
/// operation at byte 0, payload_len at bytes 4..7, then payload_len bytes).
/// A header whose operation BASP does not have, or whose payload is over
/// the bound, stops the stream: CAF would size a buffer from it.
class basp_guard {
public:
  static constexpr std::size_t header_bytes = 32;
  static constexpr std::uint32_t default_max_payload_bytes = 64u << 20;
  static constexpr std::uint8_t max_operation = 6; ///< heartbeat, BASP's last

  explicit basp_guard(std::uint32_t max_payload_bytes = default_max_payload_bytes) : max_payload_(max_payload_bytes) {}
  /// The stream's next bytes, in order, any split: false at the first bad
  /// header that ends in `data` (and ever after); then none of `data` may
  /// go on. A header split across feeds is judged when its last byte comes.
  [[nodiscard]] auto feed(std::span<const std::uint8_t> data) -> bool;
  auto ok() const -> bool { return ok_; }
  /// Why it stopped, for the log.
  auto why() const -> std::string_view { return why_; }

private:
  std::uint32_t max_payload_;
  std::array<std::uint8_t, header_bytes> header_{};
  std::size_t header_have_ = 0;
  std::uint64_t payload_left_ = 0;
  bool ok_ = true;
  std::string_view why_;
};

} // namespace troupe::fleet
