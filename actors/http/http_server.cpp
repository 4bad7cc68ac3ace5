#include "actors/http/http_server.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace troupe::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace bws = boost::beast::websocket;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

auto request::header(std::string_view name) const -> std::string {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

auto status_line(int status) -> std::string {
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return std::to_string(status) + " " + std::string(reason.data(), reason.size());
}

namespace {

// How a response's body ends: after Content-Length bytes, at the last chunk,
// or when the server closes the connection (HTTP/1.0 has no chunks).
enum class framing { length, chunked, close };

auto head_of(int status, const header_list& headers, framing f, std::size_t length, bool keep_alive)
    -> std::string {
  std::string h = "HTTP/1.1 " + status_line(status) + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (f == framing::chunked) h += "Transfer-Encoding: chunked\r\n";
  if (f == framing::length) h += "Content-Length: " + std::to_string(length) + "\r\n";
  if (!keep_alive || f == framing::close) h += "Connection: close\r\n";
  h += "\r\n";
  return h;
}

// The longest request line and header fields taken (Beast's default); longer is a 431.
constexpr std::size_t max_header_bytes = 8 * 1024;

// Where the header section of `data` ends (the index just past its empty
// line), or npos while it is incomplete.
auto header_end(std::string_view data) -> std::size_t {
  const auto at = data.find("\r\n\r\n");
  return at == std::string_view::npos ? at : at + 4;
}

// A header line that starts with a space or a tab continues the one before
// (obs-fold, RFC 9112 5.2): a server must refuse it or unfold it. Beast
// unfolds; troupe refuses, so no two parsers read one header differently.
auto has_obs_fold(std::string_view head) -> bool {
  for (auto at = head.find('\n'); at != std::string_view::npos && at + 1 < head.size(); at = head.find('\n', at + 1))
    if (head[at + 1] == ' ' || head[at + 1] == '\t') return true;
  return false;
}

// A content coding troupe cannot decode: anything but identity (RFC 9110 8.4; 415, RFC 7694).
auto undecodable_coding(std::string_view codings) -> std::string {
  std::size_t at = 0;
  while (at <= codings.size()) {
    auto end = codings.find(',', at);
    if (end == std::string_view::npos) end = codings.size();
    auto c = codings.substr(at, end - at);
    while (!c.empty() && (c.front() == ' ' || c.front() == '\t')) c.remove_prefix(1);
    while (!c.empty() && (c.back() == ' ' || c.back() == '\t')) c.remove_suffix(1);
    std::string lower(c);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char x) { return std::tolower(x); });
    if (!lower.empty() && lower != "identity") return std::string(c);
    at = end + 1;
  }
  return {};
}

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return; // an empty chunk would end the body
  char hex[20];
  const auto r = std::to_chars(hex, hex + sizeof hex, data.size(), 16);
  out.append(hex, r.ptr);
  out += "\r\n";
  out += data;
  out += "\r\n";
}

// A WebSocket connection, made from an HTTP connection's stream once the
// handler accepted its upgrade. Reads messages one after another and hands
// each to on_message; send() queues a message from any thread, and the
// strand writes the queue out one message at a time. Beast answers pings and
// sends its own when the connection is idle (keep-alive pings).
class ws_session final : public websocket, public std::enable_shared_from_this<ws_session> {
public:
  ws_session(beast::tcp_stream&& stream, const server_options& options) : ws_(std::move(stream)), options_(options) {}

  void start(bhttp::request<bhttp::string_body> req,
             std::function<websocket_handlers(std::shared_ptr<websocket>)> make) {
    bws::stream_base::timeout t{};
    t.handshake_timeout = std::chrono::seconds(30);
    t.idle_timeout = options_.websocket_idle_timeout;
    t.keep_alive_pings = true;
    ws_.set_option(t);
    ws_.read_message_max(static_cast<std::uint64_t>(options_.max_body_bytes));
    ws_.set_option(bws::stream_base::decorator([](bws::response_type& r) { r.set(bhttp::field::server, "troupe"); }));
    req_ = std::move(req);
    ws_.async_accept(req_, [self = shared_from_this(), make = std::move(make)](error_code ec) mutable {
      if (ec) return self->end();
      self->handlers_ = make(self);
      self->read();
    });
  }

  auto send(std::string text) -> std::size_t override {
    std::lock_guard lock(mu_);
    if (closed_) return 0;
    queued_ += text.size();
    queue_.push_back(std::move(text));
    if (!writing_) {
      writing_ = true;
      net::post(ws_.get_executor(), [self = shared_from_this()] { self->write_next(); });
    }
    return queued_;
  }

private:
  void read() {
    ws_.async_read(in_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->end();
      auto text = beast::buffers_to_string(self->in_.data());
      self->in_.consume(self->in_.size());
      if (self->handlers_.on_message) self->handlers_.on_message(std::move(text));
      self->read();
    });
  }

  void write_next() {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      if (queue_.empty()) {
        writing_ = false;
        return;
      }
      sending_ = std::move(queue_.front());
      queue_.pop_front();
    }
    ws_.text(true);
    ws_.async_write(net::buffer(sending_), [self = shared_from_this()](error_code ec, std::size_t) {
      {
        std::lock_guard lock(self->mu_);
        self->queued_ -= self->sending_.size();
      }
      self->sending_.clear();
      if (ec) return self->end();
      self->write_next();
    });
  }

  // The connection is over (closed by either side, or failed): once.
  void end() {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      closed_ = true;
      queue_.clear();
    }
    error_code ignored;
    ws_.next_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
    ws_.next_layer().socket().close(ignored);
    if (auto f = std::move(handlers_.on_close)) f();
    handlers_ = {};
  }

  bws::stream<beast::tcp_stream> ws_;
  const server_options& options_;
  bhttp::request<bhttp::string_body> req_;
  beast::flat_buffer in_;
  websocket_handlers handlers_; ///< strand only
  std::string sending_;         ///< strand only: the message being written

  std::mutex mu_; ///< guards what follows
  std::deque<std::string> queue_;
  std::size_t queued_ = 0;
  bool writing_ = false, closed_ = false;
};

// One connection. Reads a request, hands it to the handler, writes what the
// handler sends back, then reads the next. While a response is open it
// watches the socket for the client closing, so that an abandoned request is
// cancelled at once.
//
// Output may come from any thread (the request's sink actor). It is sent
// right there with a non-blocking send when no write is in flight, which is
// nearly always for SSE: one hop and one wake-up fewer per token than
// posting every piece to the connection's strand. What the kernel does not
// take at once, and the end of a response, go to the strand, which finishes
// them with async writes. mu_ guards the output state and the socket's
// closing, so a send never races a close (and never hits a reused fd: after
// close() Asio's handle is -1, and a late send fails with EBADF). Beast's
// timeout may close the socket without mu_, but its timer only runs while
// reading (output() refuses then) or during an async write (writing_ is set,
// so no direct send happens).
class session final : public exchange, public std::enable_shared_from_this<session> {
public:
  session(tcp::socket socket, const server_options& options, const handler& h)
    : stream_(std::move(socket)), options_(options), handler_(h) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

  void respond(int status, header_list headers, std::string body) override {
    std::string bytes = head_of(status, headers, framing::length, body.size(), keep_alive_);
    if (!head_request_) bytes += body;
    output(bytes, state::handling, state::ending);
  }

  // An HTTP/1.0 client cannot read chunks: its stream's body ends when the
  // connection closes (http10_ is set before the handler runs, and read
  // only by the calls that follow it).
  void start_stream(int status, header_list headers) override {
    if (http10_) keep_alive_ = false;
    output(head_of(status, headers, http10_ ? framing::close : framing::chunked, 0, keep_alive_), state::handling,
           state::streaming);
  }

  void write(std::string data, delivery_count delivered) override {
    if (delivered) delivered->fetch_sub(1, std::memory_order_relaxed);
    output(data, state::streaming, state::streaming, !http10_);
  }

  void end_stream() override { output(http10_ ? "" : "0\r\n\r\n", state::streaming, state::ending); }

  void accept_websocket(std::function<websocket_handlers(std::shared_ptr<websocket>)> make) override {
    post([make = std::move(make)](session& s) mutable { s.upgrade(std::move(make)); });
  }

  void on_disconnect(std::function<void()> f) override {
    std::unique_lock lock(mu_);
    if (closed_) {
      lock.unlock();
      if (f) f();
      return;
    }
    on_disconnect_ = std::move(f);
  }

private:
  enum class state { reading, handling, streaming, ending };

  // On the strand: the connection becomes a WebSocket; this session is done
  // with it (the watch is cancelled; the stream moves to the ws_session).
  void upgrade(std::function<websocket_handlers(std::shared_ptr<websocket>)> make) {
    {
      std::lock_guard lock(mu_);
      if (closed_ || state_ != state::handling || !upgrade_) return;
      closed_ = true;
      on_disconnect_ = nullptr;
    }
    ++generation_;
    error_code ignored;
    stream_.socket().cancel(ignored);
    stream_.expires_never();
    std::make_shared<ws_session>(std::move(stream_), options_)->start(std::move(*upgrade_), std::move(make));
    upgrade_.reset();
  }

  template <class F>
  void post(F&& f) {
    net::post(stream_.get_executor(), [self = shared_from_this(), f = std::forward<F>(f)]() mutable { f(*self); });
  }

  // Appends to the response if it is in state `from` (else the bytes are
  // dropped: the client is gone or the call is out of order), moves it to
  // `to`. `chunk`: framed as one chunk of a chunked body.
  void output(std::string_view bytes, state from, state to, bool chunk = false) {
    std::unique_lock lock(mu_);
    if (closed_ || state_ != from) return;
    state_ = to;
    if (chunk)
      append_chunk(out_, bytes);
    else
      out_ += bytes;
    if (!writing_) send_now(lock);
  }

  // Under mu_, no write in flight: sends what the kernel takes now. The
  // strand takes over (writing_) for a remainder, an error, or a finished
  // response (which then reads the next request or closes).
  void send_now(std::unique_lock<std::mutex>& lock) {
    const auto n = ::send(stream_.socket().native_handle(), out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) out_.erase(0, static_cast<std::size_t>(n));
    const bool failed = n < 0 && errno != EAGAIN && errno != EWOULDBLOCK;
    if (!failed && out_.empty() && state_ != state::ending) return;
    writing_ = true;
    lock.unlock();
    post([failed](session& s) { failed ? s.close() : s.flush(); });
  }

  void read() {
    {
      std::lock_guard lock(mu_);
      state_ = state::reading;
    }
    stream_.expires_after(options_.idle_timeout);
    read_header();
  }

  // Reads until the buffer holds the whole header section, which is then
  // checked as sent (Beast's parser would unfold obs-fold), then parsed
  // with the body. (The deadline set in read() covers every read.)
  void read_header() {
    const std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    const auto end = header_end(data);
    if (end == std::string_view::npos && data.size() >= max_header_bytes) return refuse_header_size();
    if (end == std::string_view::npos) {
      stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, std::size_t n) {
        self->buffer_.commit(n);
        if (ec) return self->on_read(ec);
        self->read_header();
      });
      return;
    }
    if (has_obs_fold(data.substr(0, end)))
      return refuse(400, "obsolete line folding: a header line starts with a space or a tab");
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(max_header_bytes));
    parser_->body_limit(static_cast<std::uint64_t>(options_.max_body_bytes));
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec); });
  }

  void refuse_header_size() {
    refuse(431, "the request line and headers are over the limit of " + std::to_string(max_header_bytes) + " bytes");
  }

  void on_read(error_code ec) {
    if (ec == bhttp::error::body_limit) return refuse(413, "the request body is over the limit of " +
                                                                std::to_string(options_.max_body_bytes) + " bytes");
    if (ec == bhttp::error::header_limit) return refuse_header_size();
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted)
      return close();
    if (ec) return refuse(400, "malformed HTTP request: " + ec.message());
    auto msg = parser_->release();
    // HTTP/1.1 names the host in exactly one Host header (RFC 9112 3.2).
    const auto num_hosts = msg.count(bhttp::field::host);
    if (msg.version() >= 11 && num_hosts == 0) return refuse(400, "an HTTP/1.1 request needs a Host header");
    if (num_hosts > 1) return refuse(400, "a request may have only one Host header");
    for (auto [it, end] = msg.equal_range(bhttp::field::content_encoding); it != end; ++it)
      if (const auto coding = undecodable_coding(it->value()); !coding.empty())
        return refuse(415, "the request body's Content-Encoding '" + coding + "' is not supported; send it uncompressed",
                      {{"Accept-Encoding", "identity"}});
    http10_ = msg.version() < 11;
    keep_alive_ = msg.keep_alive();
    head_request_ = msg.method() == bhttp::verb::head;
    request r;
    r.method = std::string(msg.method_string());
    r.target = std::string(msg.target());
    for (const auto& f : msg) {
      std::string name(f.name_string());
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      r.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    r.body = std::move(msg.body());
    upgrade_.reset();
    if (bws::is_upgrade(msg)) {
      r.websocket = true;
      upgrade_.emplace(std::move(msg));
    }
    {
      std::lock_guard lock(mu_);
      state_ = state::handling;
    }
    stream_.expires_never(); // a response may take long (SSE); each async write sets its own
    watch();
    handler_(std::move(r), shared_from_this());
  }

  // Answers a request the server could not read, then closes.
  void refuse(int status, const std::string& message, header_list headers = {}) {
    keep_alive_ = false;
    head_request_ = false;
    http10_ = false;
    {
      std::lock_guard lock(mu_);
      state_ = state::handling;
    }
    const std::string body = options_.error_body ? options_.error_body(status, message) : message;
    headers.emplace_back("Content-Type", "application/json");
    respond(status, std::move(headers), body);
  }

  // Notices a client that goes away while its response is open: readable
  // with nothing to read means the peer closed. Pipelined bytes just end
  // the watch (they are the next request).
  void watch() {
    stream_.socket().async_wait(
        tcp::socket::wait_read,
        net::bind_executor(stream_.get_executor(), [self = shared_from_this(), gen = generation_](error_code ec) {
          if (ec || gen != self->generation_) return;
          {
            std::lock_guard lock(self->mu_);
            if (self->closed_ || self->state_ == state::reading) return;
          }
          char c;
          const auto n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) self->close();
        }));
  }

  // On the strand, writing_ set: writes out_ with async writes until it is
  // empty, then ends the response if it is complete.
  void flush() {
    std::unique_lock lock(mu_);
    if (closed_) return;
    if (out_.empty()) {
      writing_ = false;
      const bool done = state_ == state::ending;
      lock.unlock();
      if (done) next_request();
      return;
    }
    sending_.swap(out_);
    out_.clear();
    lock.unlock();
    stream_.expires_after(options_.idle_timeout);
    net::async_write(stream_, net::buffer(sending_),
                     [self = shared_from_this()](error_code ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(error_code ec) {
    sending_.clear();
    if (ec) return close();
    stream_.expires_never();
    flush();
  }

  // The response is done: stop watching, read the next request (or close).
  void next_request() {
    {
      std::lock_guard lock(mu_);
      on_disconnect_ = nullptr; // the finished request's; the next sets its own
    }
    if (!keep_alive_) return linger();
    ++generation_;
    error_code ignored;
    stream_.socket().cancel(ignored);
    read();
  }

  // Closes after a last response without resetting the connection: stop
  // sending, read and drop what the client still sends (a body we refused)
  // for up to a second, then close. Closing with unread bytes would send an
  // RST, which can destroy the response before the client reads it.
  void linger() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(1));
    drain();
  }
  void drain() {
    stream_.async_read_some(net::buffer(discard_), [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->close(); // the client's end, or the second is up
      self->drain();
    });
  }

  void close() {
    std::function<void()> tell;
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      closed_ = true;
      if (state_ == state::handling || state_ == state::streaming) tell = std::move(on_disconnect_);
      on_disconnect_ = nullptr;
      error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_.socket().close(ignored);
    }
    if (tell) tell();
  }

  beast::tcp_stream stream_;
  const server_options& options_;
  const handler& handler_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = true;        ///< of the current request; set before the handler runs
  bool head_request_ = false;     ///< the current request is a HEAD: headers only
  bool http10_ = false;           ///< the current request is HTTP/1.0: a stream is close-delimited
  std::optional<bhttp::request<bhttp::string_body>> upgrade_; ///< a WebSocket upgrade, until taken or answered
  std::uint64_t generation_ = 0;  ///< strand only: which watch is current
  std::string sending_;           ///< strand only: the async write in flight (lives until it completes)
  char discard_[4096];            ///< strand only: bytes discarded while lingering

  std::mutex mu_; ///< guards what follows, and the socket's closing
  state state_ = state::reading;
  bool writing_ = false; ///< the strand owns output (an async write, or a hand-over posted)
  bool closed_ = false;
  std::string out_;      ///< bytes not yet sent
  std::function<void()> on_disconnect_;
};

} // namespace

struct server::impl {
  server_options options;
  handler h;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  std::atomic<bool> stopped{false};

  net::steady_timer backoff{ioc};

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (ec) {
        // Out of file descriptors, say: retrying at once would spin.
        backoff.expires_after(std::chrono::milliseconds(50));
        backoff.async_wait([this](error_code) { accept(); });
        return;
      }
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<session>(std::move(socket), options, h)->start();
      accept();
    });
  }
};

server::server(server_options options, handler h) : impl_(std::make_unique<impl>()) {
  impl_->options = std::move(options);
  impl_->h = std::move(h);
  error_code ec;
  const auto address = net::ip::make_address(impl_->options.host, ec);
  if (ec) throw std::runtime_error("server.host: '" + impl_->options.host + "' is not an IP address");
  const tcp::endpoint ep(address, impl_->options.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + impl_->options.host + ":" +
                             std::to_string(impl_->options.port) + ": " + ec.message());
  impl_->accept();
  for (int i = 0; i < std::max(1, impl_->options.threads); ++i)
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

server::~server() { stop(); }

auto server::port() const -> std::uint16_t {
  error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void server::stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
}

} // namespace troupe::http
