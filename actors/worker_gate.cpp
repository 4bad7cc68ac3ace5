#include "actors/worker_gate.hpp"

#include "service/fleet/gate_protocol.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>

#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace troupe {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
constexpr auto use_tuple = net::as_tuple(net::use_awaitable);

auto random_nonce() -> fleet::gate_nonce {
  fleet::gate_nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) == 1) return n;
  std::random_device device; // (OpenSSL's generator failing is rare; the kernel's then)
  for (auto& b : n) b = static_cast<std::uint8_t>(device());
  return n;
}

auto seconds_of(std::chrono::milliseconds t) -> std::string {
  return std::to_string(t.count() / 1000) + (t.count() % 1000 ? "." + std::to_string(t.count() % 1000 / 100) : "") + " s";
}

// TLS 1.2 or later, this side's certificate, and the peer's required and
// checked against the fleet's CA (no host names: the CA is the fleet's own).
// A context without files where TLS is off (the streams need one).
auto tls_context(const gate_tls& tls, bool server) -> std::shared_ptr<ssl::context> {
  auto ctx = std::make_shared<ssl::context>(server ? ssl::context::tls_server : ssl::context::tls_client);
  if (!tls.enabled()) return ctx;
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression);
  const auto load = [](const char* key, const std::string& path, auto&& f) {
    error_code ec;
    f(ec);
    if (ec) throw std::runtime_error(std::string(key) + ": " + path + ": " + ec.message());
  };
  load("router.worker_tls_cert", tls.cert, [&](error_code& ec) { ctx->use_certificate_chain_file(tls.cert, ec); });
  load("router.worker_tls_key", tls.key, [&](error_code& ec) { ctx->use_private_key_file(tls.key, ssl::context::pem, ec); });
  load("router.worker_tls_ca", tls.ca, [&](error_code& ec) { ctx->load_verify_file(tls.ca, ec); });
  ctx->set_verify_mode(ssl::verify_peer | (server ? ssl::verify_fail_if_no_peer_cert : 0));
  if (server) {
    // Every link is a full handshake (a worker keeps no session to resume).
    SSL_CTX_set_session_cache_mode(ctx->native_handle(), SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_TICKET);
  }
  return ctx;
}

auto is_tls_error(const error_code& ec) -> bool {
  return ec.category() == net::error::get_ssl_category() || ec.category() == ssl::error::get_stream_category();
}

// One line a second at most, however fast a peer makes them; the ones left
// out are counted in the next.
class log_limiter {
public:
  void print(const std::string& line) {
    const std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (printed_ && now - last_ < std::chrono::seconds(1)) {
      ++left_out_;
      return;
    }
    if (left_out_ > 0)
      std::fprintf(stderr, "%s (and %llu more like it)\n", line.c_str(), static_cast<unsigned long long>(left_out_));
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    printed_ = true;
    last_ = now;
    left_out_ = 0;
  }

private:
  std::mutex mutex_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point last_;
  std::uint64_t left_out_ = 0;
};

// The other node's connection: TLS over TCP, or the TCP alone.
struct peer_stream {
  peer_stream(tcp::socket socket, ssl::context& ctx, bool tls) : s(std::move(socket), ctx), tls(tls) {}
  ssl::stream<tcp::socket> s;
  bool tls;

  auto read_some(net::mutable_buffer b) -> net::awaitable<std::tuple<error_code, std::size_t>> {
    if (tls) co_return co_await s.async_read_some(b, use_tuple);
    co_return co_await s.next_layer().async_read_some(b, use_tuple);
  }
  auto write(net::const_buffer b) -> net::awaitable<std::tuple<error_code, std::size_t>> {
    if (tls) co_return co_await net::async_write(s, b, use_tuple);
    co_return co_await net::async_write(s.next_layer(), b, use_tuple);
  }
};

// One link: the other node's stream and CAF's loopback socket, on one
// strand (or the worker's one thread). Shared by the coroutines that use it.
struct link_state {
  link_state(tcp::socket socket, ssl::context& ctx, bool tls, std::uint32_t max_frame_bytes)
    : peer(std::move(socket), ctx, tls), local(peer.s.get_executor()), guard(max_frame_bytes) {}
  peer_stream peer;
  tcp::socket local;
  fleet::basp_guard guard; ///< on what goes to this node's CAF
  bool settled = false;    ///< past its handshake: the deadline no longer closes it
  bool timed_out = false;  ///< the deadline closed it
  std::atomic<bool> closed{false};

  /// Both ends at once (either pump ending ends the link).
  void close() {
    closed = true;
    error_code ignored;
    peer.s.next_layer().close(ignored);
    local.close(ignored);
  }
};

// A deadline that closes the link unless it settled first (the handler
// runs on the link's strand, as its coroutines do).
void arm_deadline(net::steady_timer& t, const std::shared_ptr<link_state>& l) {
  t.async_wait([l](error_code ec) {
    if (ec || l->settled) return;
    l->timed_out = true;
    l->close();
  });
}

// The other node to CAF: each BASP header judged before its bytes go on.
auto pump_in(std::shared_ptr<link_state> l) -> net::awaitable<void> {
  std::array<std::uint8_t, 16 * 1024> buf;
  for (;;) {
    const auto [ec, n] = co_await l->peer.read_some(net::buffer(buf));
    if (ec) break;
    if (!l->guard.feed(std::span<const std::uint8_t>(buf.data(), n))) {
      std::fprintf(stderr, "troupe: closed a worker link: %s\n", std::string(l->guard.why()).c_str());
      break;
    }
    const auto [wec, written] = co_await net::async_write(l->local, net::buffer(buf.data(), n), use_tuple);
    if (wec) break;
  }
  l->close();
}

// CAF to the other node (this node's own frames: not judged).
auto pump_out(std::shared_ptr<link_state> l) -> net::awaitable<void> {
  std::array<std::uint8_t, 16 * 1024> buf;
  for (;;) {
    const auto [ec, n] = co_await l->local.async_read_some(net::buffer(buf), use_tuple);
    if (ec) break;
    const auto [wec, written] = co_await l->peer.write(net::buffer(buf.data(), n));
    if (wec) break;
  }
  l->close();
}

void start_relay(const std::shared_ptr<link_state>& l) {
  const auto ex = l->local.get_executor();
  net::co_spawn(ex, pump_in(l), net::detached);
  net::co_spawn(ex, pump_out(l), net::detached);
}

// ---- the router node's gate ------------------------------------------------

// What the gate's coroutines share (each holds it: it outlives them).
struct gate_shared {
  std::string secret;
  std::shared_ptr<ssl::context> ctx;
  bool tls = false;
  std::uint16_t basp_port = 0;
  gate_limits limits;
  std::atomic<std::size_t> num_handshakes{0};
  log_limiter refusals, strangers;
};

struct admission {
  enum kind_t { open, refused, closed } kind = closed;
  std::string why;
};

// TLS where it is on, then the gate's handshake, answering the worker's
// bytes as they come (a stranger's first wrong byte ends it).
auto router_handshake(gate_shared& g, link_state& l) -> net::awaitable<admission> {
  if (l.peer.tls) {
    const auto [ec] = co_await l.peer.s.async_handshake(ssl::stream_base::server, use_tuple);
    if (ec) co_return admission{admission::closed, "the TLS handshake failed: " + ec.message()};
  }
  fleet::gate_server hs(g.secret, random_nonce());
  const auto hello = hs.hello();
  if (const auto [ec, n] = co_await l.peer.write(net::buffer(hello)); ec)
    co_return admission{admission::closed, ec.message()};
  std::array<std::uint8_t, fleet::gate_answer_bytes> buf{};
  while (hs.status() == fleet::gate_status::more) {
    const auto [ec, n] = co_await l.peer.read_some(net::buffer(buf.data(), hs.want()));
    if (ec) co_return admission{admission::closed, ec == net::error::eof ? "it closed the connection" : ec.message()};
    (void)hs.feed(std::span<const std::uint8_t>(buf.data(), n));
  }
  if (hs.status() == fleet::gate_status::failed) co_return admission{admission::closed, std::string(hs.why())};
  const auto verdict = hs.out();
  const auto [ec, n] = co_await l.peer.write(net::buffer(verdict.data(), verdict.size()));
  if (hs.status() == fleet::gate_status::refused) co_return admission{admission::refused, std::string(hs.why())};
  if (ec) co_return admission{admission::closed, ec.message()};
  co_return admission{admission::open, ""};
}

// One accepted connection: its handshake within the deadline, then CAF's
// door on loopback, then the relay. It counts as in its handshake (the
// accept loop counted it) until this returns.
auto admit(std::shared_ptr<gate_shared> g, tcp::socket socket) -> net::awaitable<void> {
  struct uncount {
    std::atomic<std::size_t>& n;
    ~uncount() { --n; }
  } slot{g->num_handshakes};
  error_code ec;
  const auto from = socket.remote_endpoint(ec);
  const auto who = ec ? std::string("an unknown peer") : from.address().to_string() + ":" + std::to_string(from.port());
  auto l = std::make_shared<link_state>(std::move(socket), *g->ctx, g->tls, g->limits.max_frame_bytes);
  net::steady_timer deadline(l->local.get_executor(), g->limits.handshake_timeout);
  arm_deadline(deadline, l);
  auto a = co_await router_handshake(*g, *l);
  if (a.kind == admission::open) {
    const tcp::endpoint door(net::ip::address_v4::loopback(), g->basp_port);
    if (const auto [cec] = co_await l->local.async_connect(door, use_tuple); cec)
      a = {admission::closed, "cannot reach CAF's door on 127.0.0.1:" + std::to_string(g->basp_port) + ": " + cec.message()};
  }
  if (l->timed_out) a = {admission::closed, "no handshake within " + seconds_of(g->limits.handshake_timeout)};
  if (a.kind != admission::open) {
    l->close();
    if (a.kind == admission::refused) g->refusals.print("troupe: refused a worker from " + who + ": " + a.why);
    else g->strangers.print("troupe: router.worker_port: closed a connection from " + who + ": " + a.why);
    co_return;
  }
  l->settled = true;
  deadline.cancel();
  start_relay(l);
}

auto accept_loop(std::shared_ptr<gate_shared> g, tcp::acceptor& acceptor, net::io_context& ioc)
    -> net::awaitable<void> {
  net::steady_timer backoff(ioc);
  for (;;) {
    tcp::socket socket(net::make_strand(ioc)); // each connection on a strand of its own
    const auto [ec] = co_await acceptor.async_accept(socket, use_tuple);
    if (!acceptor.is_open()) co_return;
    if (ec) {
      // Out of file descriptors, say: retrying at once would spin.
      backoff.expires_after(std::chrono::milliseconds(50));
      (void)co_await backoff.async_wait(use_tuple);
      continue;
    }
    if (g->num_handshakes.load() >= g->limits.max_handshakes) {
      g->strangers.print("troupe: router.worker_port: closed a connection: " + std::to_string(g->limits.max_handshakes) +
                         " others are in their handshake");
      error_code ignored;
      socket.close(ignored);
      continue;
    }
    ++g->num_handshakes;
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const auto ex = socket.get_executor();
    net::co_spawn(ex, admit(g, std::move(socket)), net::detached);
  }
}

} // namespace

struct worker_gate::impl {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
};

worker_gate::worker_gate(const std::string& host, std::uint16_t port, std::uint16_t basp_port, std::string secret,
                         const gate_tls& tls, gate_limits limits)
  : impl_(std::make_unique<impl>()) {
  auto g = std::make_shared<gate_shared>();
  g->secret = std::move(secret);
  g->ctx = tls_context(tls, true);
  g->tls = tls.enabled();
  g->basp_port = basp_port;
  g->limits = limits;
  error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("'" + host + "' is not an IP address");
  const tcp::endpoint ep(address, port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  net::co_spawn(impl_->ioc, accept_loop(std::move(g), a, impl_->ioc), net::detached);
  // Two threads: a peer's TLS handshake (its CPU) never holds up the relays alone.
  for (int i = 0; i < 2; ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

worker_gate::~worker_gate() {
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  error_code ignored;
  impl_->acceptor.close(ignored);
  // (The io_context's end destroys every coroutine, closing their sockets.)
}

auto worker_gate::port() const -> std::uint16_t {
  error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

// ---- a worker's end ----------------------------------------------------------

namespace {

struct link_config {
  std::string host;
  std::uint16_t port = 0;
  std::string secret;
  bool tls = false;
  gate_limits limits;
  std::shared_ptr<ssl::context> ctx;
  auto where() const -> std::string { return host + ":" + std::to_string(port); }
};

// Why a read in the handshake failed, in the words a worker's one line needs.
auto handshake_failure(const link_config& w, const link_state& l, const error_code& ec) -> worker_link::outcome {
  const auto head = "cannot reach " + w.where() + ": ";
  if (l.timed_out) return {0, head + "no answer from its gate within " + seconds_of(w.limits.connect_timeout), false};
  if (is_tls_error(ec))
    return {0, head + "the TLS handshake failed (" + ec.message() +
                   "): each side's certificate must be signed by the other's router.worker_tls_ca", false};
  if (ec == net::error::eof || ec == net::error::connection_reset)
    return {0, head + "the router node closed the connection in the gate's handshake (does one side use "
                      "router.worker_tls_* and the other not?)", false};
  return {0, head + ec.message(), false};
}

// TLS where it is on, then the gate's handshake as the worker.
auto worker_handshake(const link_config& w, link_state& l) -> net::awaitable<worker_link::outcome> {
  if (l.peer.tls) {
    const auto [ec] = co_await l.peer.s.async_handshake(ssl::stream_base::client, use_tuple);
    if (ec) co_return handshake_failure(w, l, ec);
  }
  fleet::gate_client hs(w.secret, random_nonce());
  std::array<std::uint8_t, fleet::gate_hello_bytes> buf{};
  while (hs.want() > 0) {
    const auto [ec, n] = co_await l.peer.read_some(net::buffer(buf.data(), hs.want()));
    if (ec) co_return handshake_failure(w, l, ec);
    if (hs.feed(std::span<const std::uint8_t>(buf.data(), n)) != fleet::gate_status::send) continue;
    const auto answer = hs.out();
    if (const auto [wec, written] = co_await l.peer.write(net::buffer(answer.data(), answer.size())); wec)
      co_return handshake_failure(w, l, wec);
  }
  if (hs.status() == fleet::gate_status::refused)
    co_return worker_link::outcome{0, w.where() + " refused the worker: " + std::string(hs.why()), hs.permanent()};
  if (hs.status() != fleet::gate_status::open)
    co_return worker_link::outcome{0, "cannot reach " + w.where() + ": " + std::string(hs.why()), hs.permanent()};
  co_return worker_link::outcome{};
}

// Waits for CAF's one connection on the local end, then relays.
auto serve_local(std::shared_ptr<link_state> l, std::shared_ptr<tcp::acceptor> acceptor,
                 std::chrono::milliseconds timeout) -> net::awaitable<void> {
  net::steady_timer deadline(acceptor->get_executor(), timeout);
  deadline.async_wait([acceptor](error_code ec) {
    error_code ignored;
    if (!ec) acceptor->close(ignored);
  });
  const auto [ec] = co_await acceptor->async_accept(l->local, use_tuple);
  deadline.cancel();
  error_code ignored;
  acceptor->close(ignored); // (one connection: CAF's)
  if (ec || l->closed) {
    l->close();
    co_return;
  }
  l->local.set_option(tcp::no_delay(true), ignored);
  start_relay(l);
}

struct dialed {
  worker_link::outcome out;
  std::shared_ptr<link_state> link;
};

auto dial(const link_config& w) -> net::awaitable<dialed> {
  const auto ex = co_await net::this_coro::executor;
  tcp::resolver resolver(ex);
  const auto [rec, endpoints] = co_await resolver.async_resolve(w.host, std::to_string(w.port), use_tuple);
  if (rec) co_return dialed{{0, "cannot reach " + w.where() + ": " + rec.message(), false}, nullptr};
  auto l = std::make_shared<link_state>(tcp::socket(ex), *w.ctx, w.tls, w.limits.max_frame_bytes);
  net::steady_timer deadline(ex, w.limits.connect_timeout);
  arm_deadline(deadline, l);
  if (const auto [cec, ep] = co_await net::async_connect(l->peer.s.next_layer(), endpoints, use_tuple); cec)
    co_return dialed{handshake_failure(w, *l, cec), nullptr};
  error_code ignored;
  l->peer.s.next_layer().set_option(tcp::no_delay(true), ignored);
  auto out = co_await worker_handshake(w, *l);
  auto acceptor = std::make_shared<tcp::acceptor>(ex);
  const tcp::endpoint local(net::ip::address_v4::loopback(), 0);
  error_code ec;
  if (out.error.empty()) {
    acceptor->open(local.protocol(), ec);
    if (!ec) acceptor->bind(local, ec);
    if (!ec) acceptor->listen(1, ec);
    if (!ec) out.local_port = acceptor->local_endpoint(ec).port();
    if (ec) out = {0, "cannot listen on 127.0.0.1 for CAF: " + ec.message(), false};
  }
  if (!out.error.empty()) {
    l->close();
    co_return dialed{std::move(out), nullptr};
  }
  l->settled = true;
  deadline.cancel();
  net::co_spawn(ex, serve_local(l, std::move(acceptor), w.limits.local_accept_timeout), net::detached);
  co_return dialed{std::move(out), std::move(l)};
}

} // namespace

struct worker_link::impl {
  link_config config;
  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::thread thread;
  std::shared_ptr<link_state> link; ///< the current one (its closed flag is atomic)
};

worker_link::worker_link(std::string host, std::uint16_t port, std::string secret, const gate_tls& tls,
                         gate_limits limits)
  : impl_(std::make_unique<impl>()) {
  auto& c = impl_->config;
  c.host = std::move(host);
  c.port = port;
  c.secret = std::move(secret);
  c.tls = tls.enabled();
  c.limits = limits;
  c.ctx = tls_context(tls, false);
  impl_->thread = std::thread([this] { impl_->ioc.run(); });
}

worker_link::~worker_link() {
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->thread.join();
}

auto worker_link::connect() -> outcome {
  if (auto old = std::exchange(impl_->link, nullptr))
    net::post(impl_->ioc, [old] { old->close(); });
  try {
    auto got = net::co_spawn(impl_->ioc, dial(impl_->config), net::use_future).get();
    impl_->link = std::move(got.link);
    return got.out;
  } catch (const std::exception& e) {
    return {0, "cannot reach " + impl_->config.where() + ": " + e.what(), false};
  }
}

auto worker_link::closed() const -> bool { return !impl_->link || impl_->link->closed.load(); }

void check_gate_tls(const gate_tls& tls) { (void)tls_context(tls, true); }

} // namespace troupe
