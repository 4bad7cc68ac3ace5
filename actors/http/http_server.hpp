#pragma once
// The HTTP/1.1 front door, with Beast kept behind this plain interface so
// that only http_server.cpp compiles Beast. Keep-alive, a body size limit,
// timeouts for idle and slow clients, and streamed responses (chunked; for an
// HTTP/1.0 client, ended by closing the connection) whose writes may come
// from any thread. Requests it cannot take it answers itself: 400 (malformed,
// no Host in HTTP/1.1, obsolete line folding), 413 (body over the limit), 415
// (a Content-Encoding other than identity), 431 (headers over 8 KiB).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace troupe::http {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct request {
  std::string method; ///< "GET", "POST", ... (a HEAD response gets no body)
  std::string target; ///< path and query, as sent
  header_list headers; ///< names lower-cased
  std::string body;
  bool websocket = false; ///< a WebSocket upgrade (exchange::accept_websocket may take it)

  /// The first header named `name` (lower case), or "".
  auto header(std::string_view name) const -> std::string;
};

/// An open WebSocket connection. Thread-safe; does nothing once closed.
class websocket {
public:
  virtual ~websocket() = default;
  /// Queues one text message; returns the bytes queued and not yet sent on
  /// this connection (this message included). Never blocks.
  virtual auto send(std::string text) -> std::size_t = 0;
};

/// What the application does with a connection's messages. Both run on the
/// connection's strand, one at a time; on_close runs once, when the
/// connection ends for whatever reason (and after it, nothing).
struct websocket_handlers {
  std::function<void(std::string)> on_message;
  std::function<void()> on_close;
};

/// One request's way back to its client. Every member is thread-safe (work
/// is posted to the connection's strand) and does nothing once the client is
/// gone. Exactly one of respond() or start_stream() ... end_stream() per request.
class exchange {
public:
  virtual ~exchange() = default;
  /// A whole response, with Content-Length.
  virtual void respond(int status, header_list headers, std::string body) = 0;
  /// Sends the status line and headers of a streamed response: chunked, or
  /// for an HTTP/1.0 request close-delimited (the connection closes after it).
  virtual void start_stream(int status, header_list headers) = 0;
  /// A count the connection decrements once bytes given to write() reached
  /// it (sent, queued behind a write in flight, or dropped: client gone).
  using delivery_count = std::shared_ptr<std::atomic<std::int32_t>>;

  /// Appends body bytes. Bytes given while a write is in flight go out
  /// together in the next write (one chunk, one send). `delivered`, if
  /// given, is decremented when they reach the connection.
  virtual void write(std::string data, delivery_count delivered = nullptr) = 0;
  /// Ends the streamed body; the connection then reads the next request (or
  /// closes, after a close-delimited one).
  virtual void end_stream() = 0;
  /// `f` runs once (on the connection's strand) if the client disconnects, a
  /// write fails or times out before the response ended. Set it before
  /// writing; the handler runs at most once.
  virtual void on_disconnect(std::function<void()> f) = 0;
  /// For a request with `websocket` set, instead of a response: completes
  /// the upgrade, then calls `make` with the connection for its handlers.
  virtual void accept_websocket(std::function<websocket_handlers(std::shared_ptr<websocket>)> make) = 0;
};

using handler = std::function<void(request, std::shared_ptr<exchange>)>;

struct server_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080; ///< 0: any free port (see server::port())
  int threads = 1;
  std::int64_t max_body_bytes = 1 << 20;  ///< larger bodies get 413
  std::chrono::milliseconds idle_timeout{30'000}; ///< reading a request, or one write
  /// A WebSocket silent this long is closed; at half of it the server pings.
  std::chrono::milliseconds websocket_idle_timeout{60'000};
  /// The body of a 400 / 413 / 415 / 431 the server sends itself (given status, message).
  std::function<std::string(int, const std::string&)> error_body;
};

class server {
public:
  /// Binds and listens (throws std::runtime_error with one line when it
  /// cannot), then serves on `options.threads` threads until stop().
  server(server_options options, handler h);
  ~server();
  server(const server&) = delete;
  auto operator=(const server&) -> server& = delete;

  auto port() const -> std::uint16_t;
  /// Stops every thread; pending work is dropped. Idempotent.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// "200 OK", "404 Not Found", ... (the reason phrase of a status).
auto status_line(int status) -> std::string;

} // namespace troupe::http
