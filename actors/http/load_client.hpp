#pragma once
// The load generator behind `troupe bench`: many concurrent HTTP/1.1
// requests to an OpenAI-compatible server, each on its own connection, sent
// on a schedule, their SSE streams timed event by event. One thread; Asio
// kept behind this header.

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::http {

struct load_request {
  std::string path; ///< "/v1/completions"
  std::string body; ///< JSON, with "stream": true
  double send_at_s = 0; ///< seconds after the run starts (waits longer under max_concurrency)
  std::string headers;  ///< more header lines, each ending in "\r\n" (an Authorization, say)
};

/// What one request saw, in seconds since the run started.
struct load_result {
  bool ok = false;
  std::string error;           ///< why not ok: a connect error, an HTTP status and its body, a cut stream
  double start_s = 0;          ///< the request's first byte went out
  double end_s = 0;            ///< [DONE] (or the body's end) arrived
  std::vector<double> content_s; ///< arrival of each event carrying text
  std::int64_t prompt_tokens = 0;     ///< from the usage chunk
  std::int64_t completion_tokens = 0; ///< from the usage chunk
};

/// Runs every request against host:port with at most max_concurrency in
/// flight (0: no limit). Results in request order.
auto run_load(const std::string& host, std::uint16_t port, const std::vector<load_request>& requests,
              int max_concurrency) -> std::vector<load_result>;

} // namespace troupe::http
