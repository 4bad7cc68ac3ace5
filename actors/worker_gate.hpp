#pragma once
// The workers' link, in front of CAF's BASP: the router node's gate at
// router.worker_port, and a worker's end of it. Each runs on Asio threads
// of its own (never CAF's multiplexer): TCP, mutual TLS where
// router.worker_tls_* are set, then the gate's handshake (a proof of the
// fleet's secret each way, service/fleet/gate_protocol.hpp); only then does
// it relay bytes to and from CAF on 127.0.0.1, checking every BASP header
// it hands CAF against a bound (basp_guard). A peer that breaks any of it
// loses its own connection and nothing else.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace troupe {

/// The PEM files of the workers' mutual TLS; all empty: plain TCP.
struct gate_tls {
  std::string cert; ///< this side's certificate
  std::string key;  ///< its private key
  std::string ca;   ///< the CA that must have signed the other side's certificate
  auto enabled() const -> bool { return !cert.empty(); }
};

/// The gate's bounds (the defaults are the ones troupe uses).
struct gate_limits {
  /// Router: from accept to the verdict, TLS included; then the connection closes.
  std::chrono::milliseconds handshake_timeout{5000};
  /// Router: connections still in their handshake; one more is closed at once.
  std::size_t max_handshakes = 64;
  /// Worker: from connect to the verdict (longer than the router's, so that
  /// the router's closing is what a worker reports).
  std::chrono::milliseconds connect_timeout{10000};
  /// Worker: how long the local end waits for CAF's one connection.
  std::chrono::milliseconds local_accept_timeout{30000};
  /// The largest BASP payload either side hands its CAF (64 MiB).
  std::uint32_t max_frame_bytes = 64u << 20;
};

/// Loads router.worker_tls_* as the gate will (OpenSSL reads the
/// certificate, the key and the CA), for `troupe serve`'s checks before it
/// listens. Throws std::runtime_error naming the key.
void check_gate_tls(const gate_tls& tls);

/// The router node's gate: listens on host:port and, for each worker that
/// passes TLS and the handshake, connects to CAF's door at
/// 127.0.0.1:basp_port and relays. Two threads of its own; each connection
/// on a strand. Refusals of a wrong secret are logged (one line a second at most).
class worker_gate {
public:
  /// Listens at once (port 0: any free one). Throws std::runtime_error:
  /// "cannot listen on HOST:PORT: why", or a TLS file OpenSSL refuses.
  worker_gate(const std::string& host, std::uint16_t port, std::uint16_t basp_port, std::string secret,
              const gate_tls& tls, gate_limits limits = {});
  /// Closes the listener and every link (the workers see their link drop).
  ~worker_gate();
  worker_gate(const worker_gate&) = delete;
  auto operator=(const worker_gate&) -> worker_gate& = delete;

  /// Where it listens.
  auto port() const -> std::uint16_t;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A worker's end of the link: one link at a time to host:port, on a
/// thread of its own. connect() runs TCP, TLS and the handshake, then
/// listens on 127.0.0.1 for CAF's one connection (remote_actor to
/// local_port), which it relays to the router node.
class worker_link {
public:
  /// Loads the TLS files (throws std::runtime_error naming the one OpenSSL
  /// refuses); connects nothing yet.
  worker_link(std::string host, std::uint16_t port, std::string secret, const gate_tls& tls, gate_limits limits = {});
  ~worker_link();
  worker_link(const worker_link&) = delete;
  auto operator=(const worker_link&) -> worker_link& = delete;

  struct outcome {
    std::uint16_t local_port = 0; ///< where CAF connects; 0: it failed
    std::string error;            ///< why it failed, one line ("cannot reach ...", "... refused the worker: ...")
    bool permanent = false;       ///< the router node refused in a way no retry changes (secret, version)
  };
  /// Closes the link it had, then opens a new one. Blocks, within
  /// limits.connect_timeout.
  [[nodiscard]] auto connect() -> outcome;
  /// Whether the current link has closed: either end went, a frame broke the
  /// bound, or CAF did not connect in time. (CAF notices too: its
  /// connection to local_port closes with it.)
  auto closed() const -> bool;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
