// troupe bench-loopback: this machine's ceiling for streaming small events
// over many loopback TCP connections, with no HTTP, JSON or actors: one
// thread writes one event to each connection in turn, another reads them
// all with epoll. make bench-serve sets the server's figures against it.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "base/stats.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace troupe::cli {
namespace {

using clock_type = std::chrono::steady_clock;

void must(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// A listening socket on loopback and `streams` connections to it: each
// client end and the server end it was accepted as.
struct connections {
  int listener = -1;
  std::vector<int> client, server;
};

// Opens the listener and connects `streams` clients to it.
auto connect_streams(int streams) -> connections {
  connections c;
  c.listener = ::socket(AF_INET, SOCK_STREAM, 0);
  must(c.listener >= 0, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  must(::bind(c.listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
  must(::listen(c.listener, 4096) == 0, "listen");
  socklen_t len = sizeof addr;
  ::getsockname(c.listener, reinterpret_cast<sockaddr*>(&addr), &len);

  c.client.resize(static_cast<std::size_t>(streams));
  c.server.resize(static_cast<std::size_t>(streams));
  const int one = 1;
  for (int i = 0; i < streams; ++i) {
    c.client[static_cast<std::size_t>(i)] = ::socket(AF_INET, SOCK_STREAM, 0);
    must(::connect(c.client[static_cast<std::size_t>(i)], reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "connect");
    c.server[static_cast<std::size_t>(i)] = ::accept(c.listener, nullptr, nullptr);
    must(c.server[static_cast<std::size_t>(i)] >= 0, "accept");
    ::setsockopt(c.server[static_cast<std::size_t>(i)], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return c;
}

// Reader: per stream, the gap before each event (events sharing a read: 0),
// until every event has come; t_end: when the last did, since t0.
void read_events(const std::vector<int>& client, int events, std::size_t event_size, clock_type::time_point t0,
                 std::vector<double>& gaps, double& t_end) {
  const auto streams = static_cast<int>(client.size());
  const int ep = ::epoll_create1(0);
  for (int i = 0; i < streams; ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, client[static_cast<std::size_t>(i)], &ev);
  }
  std::vector<double> last(static_cast<std::size_t>(streams), -1.0);
  std::vector<int> got(static_cast<std::size_t>(streams), 0), partial(static_cast<std::size_t>(streams), 0);
  std::int64_t left = static_cast<std::int64_t>(streams) * events;
  std::vector<epoll_event> ready(256);
  std::vector<char> buf(1 << 16);
  while (left > 0) {
    const int n = ::epoll_wait(ep, ready.data(), static_cast<int>(ready.size()), -1);
    const double now = std::chrono::duration<double>(clock_type::now() - t0).count();
    for (int k = 0; k < n; ++k) {
      const auto i = ready[static_cast<std::size_t>(k)].data.u32;
      const auto r = ::read(client[i], buf.data(), buf.size());
      if (r <= 0) continue;
      // Events are fixed-size: count whole ones completed by this read.
      const int before = got[i];
      partial[i] += static_cast<int>(r);
      got[i] += partial[i] / static_cast<int>(event_size);
      partial[i] %= static_cast<int>(event_size);
      for (int e = before; e < got[i]; ++e) {
        if (e > 0) gaps.push_back(e == before ? (now - last[i]) * 1e3 : 0.0);
        left -= 1;
      }
      if (got[i] > before) last[i] = now;
    }
  }
  t_end = std::chrono::duration<double>(clock_type::now() - t0).count();
  ::close(ep);
}

// Writer: round after round, one event per connection (blocking sends: a
// full socket buffer holds the writer back, TCP's own backpressure).
void write_events(const std::vector<int>& server, int events, const std::string& event) {
  const auto streams = static_cast<int>(server.size());
  for (int e = 0; e < events; ++e)
    for (int i = 0; i < streams; ++i) {
      const char* p = event.data();
      std::size_t n = event.size();
      while (n > 0) {
        const auto w = ::send(server[static_cast<std::size_t>(i)], p, n, MSG_NOSIGNAL);
        must(w > 0, "send");
        p += w;
        n -= static_cast<std::size_t>(w);
      }
    }
}

} // namespace

auto run_bench_loopback(std::span<char* const> argv) -> int {
  const args a(argv, {"streams", "events", "event-bytes"}, {});
  const auto streams = static_cast<int>(a.integer("streams", 1000));
  const auto events = static_cast<int>(a.integer("events", 256));
  const auto bytes = static_cast<int>(a.integer("event-bytes", 160));
  if (streams < 1 || events < 1 || bytes < 4) throw usage_error("--streams, --events and --event-bytes must be positive");

  const auto c = connect_streams(streams);
  const std::string event = "data: " + std::string(static_cast<std::size_t>(bytes - 8), 'x') + "\n\n";

  std::vector<double> gaps;
  gaps.reserve(static_cast<std::size_t>(streams) * static_cast<std::size_t>(events));
  const auto t0 = clock_type::now();
  double t_end = 0;
  std::thread reader([&] { read_events(c.client, events, event.size(), t0, gaps, t_end); });
  write_events(c.server, events, event);
  reader.join();
  for (int i = 0; i < streams; ++i) {
    ::close(c.client[static_cast<std::size_t>(i)]);
    ::close(c.server[static_cast<std::size_t>(i)]);
  }
  ::close(c.listener);
  std::sort(gaps.begin(), gaps.end());
  const auto pct = [&](double q) { return percentile(gaps, q); };
  std::printf("loopback ceiling: %d streams x %d events of %d bytes, one writer and one reader thread\n", streams, events,
              bytes);
  std::printf("%-34s %10.0f\n", "Events/s:", static_cast<double>(streams) * events / t_end);
  std::printf("%-34s %10.2f\n", "Median gap (ms):", pct(0.5));
  std::printf("%-34s %10.2f\n", "P99 gap (ms):", pct(0.99));
  return 0;
}

} // namespace troupe::cli
