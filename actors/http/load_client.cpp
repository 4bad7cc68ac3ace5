#include "actors/http/load_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <simdjson.h>

#include <chrono>
#include <deque>
#include <memory>

namespace troupe::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using clock_type = std::chrono::steady_clock;

// The state every connection shares (one thread: no locks).
struct run_state {
  net::io_context ioc;
  tcp::endpoint endpoint;
  const std::vector<load_request>* requests = nullptr;
  std::vector<load_result> results;
  clock_type::time_point t0;
  int max_concurrency = 0;
  int in_flight = 0;
  std::deque<std::size_t> ready; ///< due, waiting for a concurrency slot
  simdjson::dom::parser json;

  auto now_s() const -> double { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
  void start(std::size_t i);
  void finished() {
    --in_flight;
    if (!ready.empty()) {
      const auto i = ready.front();
      ready.pop_front();
      start(i);
    }
  }
};

// One request on its own connection: write it, then parse the response as
// it arrives: status line and headers, chunked or sized body, SSE events.
class connection : public std::enable_shared_from_this<connection> {
public:
  connection(run_state& run, std::size_t index) : run_(run), index_(index), socket_(run.ioc) {}

  void start() {
    result().start_s = run_.now_s();
    socket_.async_connect(run_.endpoint, [self = shared_from_this()](error_code ec) {
      if (ec) return self->fail("connect: " + ec.message());
      self->socket_.set_option(tcp::no_delay(true), ec);
      const auto& r = (*self->run_.requests)[self->index_];
      self->out_ = "POST " + r.path + " HTTP/1.1\r\nHost: troupe\r\nContent-Type: application/json\r\n" + r.headers +
                   "Content-Length: " + std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" + r.body;
      net::async_write(self->socket_, net::buffer(self->out_), [self](error_code ec2, std::size_t) {
        if (ec2) return self->fail("write: " + ec2.message());
        self->read();
      });
    });
  }

private:
  auto result() -> load_result& { return run_.results[index_]; }

  void read() {
    socket_.async_read_some(net::buffer(buf_), [self = shared_from_this()](error_code ec, std::size_t n) {
      if (self->done_) return;
      if (n > 0) {
        self->in_.append(self->buf_, n);
        self->parse(self->run_.now_s());
        if (self->done_) return;
      }
      if (ec) return self->fail(ec == net::error::eof ? "the stream ended before [DONE]" : "read: " + ec.message());
      self->read();
    });
  }

  void parse(double t) {
    if (!headers_done_) {
      const auto end = in_.find("\r\n\r\n");
      if (end == std::string::npos) return;
      status_ = std::atoi(in_.c_str() + in_.find(' ') + 1);
      std::string head = in_.substr(0, end);
      for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      chunked_ = head.find("transfer-encoding: chunked") != std::string::npos;
      if (const auto p = head.find("content-length:"); p != std::string::npos)
        length_left_ = std::atoll(head.c_str() + p + 15);
      in_.erase(0, end + 4);
      headers_done_ = true;
    }
    // Move body bytes into body_, undoing the chunked framing.
    std::size_t pos = 0;
    while (pos < in_.size() && !body_done_) {
      if (!chunked_) {
        const auto n = std::min<std::size_t>(in_.size() - pos, static_cast<std::size_t>(length_left_));
        body_.append(in_, pos, n);
        pos += n;
        length_left_ -= static_cast<std::int64_t>(n);
        body_done_ = length_left_ == 0;
      } else if (chunk_left_ > 0) {
        const auto n = std::min<std::size_t>(in_.size() - pos, static_cast<std::size_t>(chunk_left_));
        body_.append(in_, pos, n);
        pos += n;
        chunk_left_ -= static_cast<std::int64_t>(n);
        if (chunk_left_ == 0) chunk_left_ = -2; // its CRLF next
      } else if (chunk_left_ == -2) {
        if (in_.size() - pos < 2) break;
        pos += 2;
        chunk_left_ = 0;
      } else {
        const auto eol = in_.find("\r\n", pos);
        if (eol == std::string::npos) break;
        chunk_left_ = std::strtoll(in_.c_str() + pos, nullptr, 16);
        pos = eol + 2;
        if (chunk_left_ == 0) body_done_ = true;
      }
    }
    in_.erase(0, pos);
    if (status_ != 200) {
      if (body_done_) fail("HTTP " + std::to_string(status_) + ": " + body_);
      return;
    }
    for (std::size_t cut; (cut = body_.find("\n\n", body_pos_)) != std::string::npos;) {
      event(std::string_view(body_).substr(body_pos_, cut - body_pos_), t);
      body_pos_ = cut + 2;
      if (done_) return;
    }
    if (body_pos_ > 4096) {
      body_.erase(0, body_pos_);
      body_pos_ = 0;
    }
    if (body_done_) fail("the stream ended before [DONE]");
  }

  void event(std::string_view e, double t) {
    if (!e.starts_with("data: ")) return;
    e.remove_prefix(6);
    if (e == "[DONE]") {
      result().ok = true;
      result().end_s = t;
      return finish();
    }
    simdjson::dom::element doc;
    if (run_.json.parse(e.data(), e.size()).get(doc)) return fail("an event is not JSON");
    simdjson::dom::array choices;
    if (!doc["choices"].get(choices)) {
      for (auto ch : choices) {
        // A token arrived: visible text, or (logprobs asked for) a token
        // whose text is still incomplete.
        std::string_view text;
        simdjson::dom::array tokens;
        const bool has_text = (!ch["text"].get(text) || !ch["delta"]["content"].get(text)) && !text.empty();
        if (has_text || (!ch["logprobs"]["tokens"].get(tokens) && tokens.size() > 0)) result().content_s.push_back(t);
      }
    }
    simdjson::dom::object usage;
    if (!doc["usage"].get(usage)) {
      std::int64_t v = 0;
      if (!usage["prompt_tokens"].get(v)) result().prompt_tokens = v;
      if (!usage["completion_tokens"].get(v)) result().completion_tokens = v;
    }
  }

  void fail(std::string why) {
    if (done_) return;
    result().ok = false;
    result().error = std::move(why);
    result().end_s = run_.now_s();
    finish();
  }

  void finish() {
    done_ = true;
    error_code ignored;
    socket_.close(ignored);
    run_.finished();
  }

  run_state& run_;
  std::size_t index_;
  tcp::socket socket_;
  std::string out_;
  char buf_[16384];
  std::string in_;   ///< received, not yet taken apart
  std::string body_; ///< the body, framing removed
  std::size_t body_pos_ = 0;
  bool headers_done_ = false, chunked_ = false, body_done_ = false, done_ = false;
  int status_ = 0;
  std::int64_t length_left_ = 0;
  std::int64_t chunk_left_ = 0; ///< >0: bytes of the chunk left; 0: a size line next; -2: a CRLF next
};

void run_state::start(std::size_t i) {
  ++in_flight;
  std::make_shared<connection>(*this, i)->start();
}

} // namespace

auto run_load(const std::string& host, std::uint16_t port, const std::vector<load_request>& requests,
              int max_concurrency) -> std::vector<load_result> {
  run_state run;
  run.endpoint = tcp::endpoint(net::ip::make_address(host), port);
  run.requests = &requests;
  run.results.resize(requests.size());
  run.max_concurrency = max_concurrency;
  run.t0 = clock_type::now();
  // One timer walks the schedule, releasing each request when it is due.
  net::steady_timer timer(run.ioc);
  std::size_t next = 0;
  std::function<void()> release = [&] {
    const double now = run.now_s();
    while (next < requests.size() && requests[next].send_at_s <= now) {
      if (run.max_concurrency > 0 && run.in_flight >= run.max_concurrency) run.ready.push_back(next);
      else run.start(next);
      ++next;
    }
    if (next < requests.size()) {
      timer.expires_at(run.t0 + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(requests[next].send_at_s)));
      timer.async_wait([&](error_code) { release(); });
    }
  };
  release();
  run.ioc.run();
  return std::move(run.results);
}

} // namespace troupe::http
