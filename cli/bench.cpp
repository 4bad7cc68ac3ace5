// troupe bench: what `vllm bench serve` measures, against any
// OpenAI-compatible server: TTFT, TPOT, ITL, E2E (mean, median, p99),
// request and token throughput, and goodput under SLOs.

#include "actors/http/load_client.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/trace_flags.hpp"
#include "base/json_text.hpp"
#include "base/rng.hpp"
#include "base/stats.hpp"
#include "sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace troupe::cli {
namespace {

struct slo {
  double ttft_ms = std::numeric_limits<double>::infinity();
  double tpot_ms = std::numeric_limits<double>::infinity();
  double e2el_ms = std::numeric_limits<double>::infinity();
};

auto parse_goodput(const std::string& s) -> slo {
  slo g;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto colon = item.find(':');
    double v = 0;
    try {
      v = std::stod(item.substr(colon + 1));
    } catch (const std::exception&) {
      throw usage_error("--goodput expects name:ms pairs (ttft, tpot, e2el), got '" + item + "'");
    }
    const auto name = item.substr(0, colon);
    if (colon == std::string::npos || v <= 0) throw usage_error("--goodput expects name:ms pairs, got '" + item + "'");
    if (name == "ttft") g.ttft_ms = v;
    else if (name == "tpot") g.tpot_ms = v;
    else if (name == "e2el") g.e2el_ms = v;
    else throw usage_error("--goodput knows ttft, tpot and e2el, not '" + name + "'");
  }
  return g;
}

// Plain English words, so that any tokenizer sees ordinary text: a prompt of
// n words is about n tokens for a Llama-style vocabulary.
constexpr const char* k_words[] = {
    "the", "license", "software", "you", "may", "copy", "work", "any", "code", "source", "of", "and",
    "to", "in", "this", "that", "for", "with", "terms", "conditions", "permission", "notice", "free",
    "program", "rights", "use", "modify", "distribute", "without", "warranty", "version", "public"};

auto prompt_of(rng& g, std::int64_t words) -> std::string {
  std::string p;
  for (std::int64_t i = 0; i < words; ++i) {
    if (i) p += ' ';
    p += k_words[g.next() % std::size(k_words)];
  }
  return p;
}

// Lengths like ShareGPT's conversations: log-normal, clipped (inputs median
// ~200 tokens with a long tail, outputs median ~150), so that a prompt
// (about a token a word) and its output fit a 1024-token context, as
// vLLM's ShareGPT sampling prunes what does not fit.
auto lognormal(rng& g, double mu, double sigma, std::int64_t lo, std::int64_t hi) -> std::int64_t {
  const double x = std::exp(mu + sigma * g.normal());
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(x), lo, hi);
}

struct summary {
  double mean = 0, median = 0, p95 = 0, p99 = 0;
};

auto summarize(std::vector<double> v) -> summary {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  summary s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = percentile(v, 0.5);
  s.p95 = percentile(v, 0.95);
  s.p99 = percentile(v, 0.99);
  return s;
}

void print_summary(const char* title, const char* unit, const summary& s) {
  std::printf("%-34s %10.2f\n", (std::string("Mean ") + title + " (" + unit + "):").c_str(), s.mean);
  std::printf("%-34s %10.2f\n", (std::string("Median ") + title + " (" + unit + "):").c_str(), s.median);
  std::printf("%-34s %10.2f\n", (std::string("P95 ") + title + " (" + unit + "):").c_str(), s.p95);
  std::printf("%-34s %10.2f\n", (std::string("P99 ") + title + " (" + unit + "):").c_str(), s.p99);
}

// The flags, checked in order.
struct bench_options {
  std::string url, host, dataset, rate_s, endpoint;
  std::uint16_t port = 0;
  double rate = 0, burstiness = 0;
  int concurrency = 0;
  std::int64_t n = 0, in_len = 0, out_len = 0, shared_words = 0;
  bool goodput = false;
  slo goal;
  std::vector<double> weights;
  double weight_sum = 0;
  std::optional<std::string> model;
  std::uint64_t seed = 0;
  std::string auth;
};

// Reads and checks the flags; a usage_error for a bad one.
auto parse_bench_options(const args& a) -> bench_options {
  bench_options o;
  o.url = a.str("url", "http://127.0.0.1:8080");
  const std::string prefix = "http://";
  if (!o.url.starts_with(prefix)) throw usage_error("--url must start with http://");
  const auto hostport = o.url.substr(prefix.size(), o.url.find('/', prefix.size()) - prefix.size());
  const auto colon = hostport.rfind(':');
  o.host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  o.port = static_cast<std::uint16_t>(colon == std::string::npos ? 80 : std::stoi(hostport.substr(colon + 1)));
  o.dataset = a.str("dataset", "random");
  if (o.dataset != "random" && o.dataset != "sharegpt-like" && o.dataset != "trace")
    throw usage_error("--dataset is random, sharegpt-like or trace");
  if ((o.dataset == "trace") != a.has("trace")) throw usage_error("--dataset trace goes with --trace FILE");
  for (const auto& f : trace_flag_names())
    if (a.has(f) && o.dataset != "trace") throw usage_error("--" + f + " goes with --dataset trace");
  o.rate_s = a.str("request-rate", "inf");
  o.rate = o.rate_s == "inf" ? std::numeric_limits<double>::infinity() : a.real("request-rate", 1.0);
  o.burstiness = a.real("burstiness", 1.0);
  o.concurrency = static_cast<int>(a.integer("max-concurrency", 0));
  o.n = a.integer("num-prompts", 100);
  o.in_len = a.integer("random-input-len", 128);
  o.out_len = a.integer("random-output-len", 128);
  o.endpoint = a.str("endpoint", "/v1/completions");
  if (o.rate <= 0 || o.burstiness <= 0 || o.concurrency < 0 || o.n < 1 || o.in_len < 1 || o.out_len < 1)
    throw usage_error("--request-rate, --burstiness, --num-prompts and the lengths must be positive");
  if (o.endpoint != "/v1/completions" && o.endpoint != "/v1/chat/completions")
    throw usage_error("--endpoint is /v1/completions or /v1/chat/completions");
  o.goodput = a.has("goodput");
  o.goal = o.goodput ? parse_goodput(a.str("goodput", "")) : slo{};
  // Tenants (sent as `user`), drawn with these relative weights; and a
  // prefix of words every prompt shares (a system prompt).
  if (a.has("tenant-weights"))
    for (const int w : parse_list(a.str("tenant-weights", ""), "tenant-weights")) o.weights.push_back(w);
  for (const double w : o.weights) o.weight_sum += w;
  if (!o.weights.empty() && o.weight_sum <= 0) throw usage_error("--tenant-weights needs a positive weight");
  o.shared_words = a.integer("shared-prefix-len", 0);
  if (o.shared_words < 0) throw usage_error("--shared-prefix-len must be >= 0");
  o.seed = static_cast<std::uint64_t>(a.integer("seed", 0));
  if (a.has("model")) o.model = a.str("model", "");
  // A tenant's key (server.tenants), sent with every request.
  const auto key = a.str("api-key", "");
  o.auth = key.empty() ? "" : "Authorization: Bearer " + key + "\r\n";
  return o;
}

// The requests to send, and each one's tenant (-1: none).
struct bench_requests {
  std::vector<http::load_request> reqs;
  std::vector<int> tenant_of;
};

// A trace (the simulator's CSV): each request at its time, its prompt as
// token ids of exactly its length (a group's first --shared-prefix-len
// shared), its output exactly its length; its tenant as `user`. With
// logprobs 0 every token is an event, so each is timed, even one whose
// text is not complete yet (ITL per token, as the simulator counts it).
void add_trace_requests(const args& a, const bench_options& o, bench_requests& out) {
  sim::scenario trace_scenario;
  trace_scenario.process = "trace";
  trace_scenario.trace = a.str("trace", "");
  trace_scenario.prefix_tokens = static_cast<std::int32_t>(o.shared_words);
  trace_scenario.cost.model.vocab = 1000; // ids every preset's tokenizer has
  trace_scenario.seed = o.seed;
  apply_trace_flags(a, trace_scenario);
  sim::workload trace(trace_scenario); // a scenario_error names the line; main() prints it
  std::vector<token_id> ids;
  while (auto q = trace.next()) {
    trace.prompt_of(*q, ids);
    std::string body = "{\"prompt\":[";
    for (std::size_t i = 0; i < ids.size(); ++i) body += (i ? "," : "") + std::to_string(ids[i]);
    body += "],\"max_tokens\":" + std::to_string(q->output_tokens) + ",\"priority\":" + std::to_string(q->priority);
    if (q->tenant > 0) {
      body += ",\"user\":";
      json_text::append_string(body, trace.tenant_names()[static_cast<std::size_t>(q->tenant)]);
    }
    body += ",\"logprobs\":0,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    out.reqs.push_back({"/v1/completions", std::move(body), q->arrival_s, o.auth});
    out.tenant_of.push_back(-1);
  }
}

// --num-prompts made-up prompts and their arrival times, from one seeded
// stream.
void add_drawn_requests(const bench_options& o, bench_requests& out) {
  rng g(o.seed);
  rng prefix_rng(12345);
  const std::string shared = o.shared_words > 0 ? prompt_of(prefix_rng, o.shared_words) + " " : "";
  double t = 0;
  for (std::int64_t i = 0; i < o.n; ++i) {
    const auto words = o.dataset == "random" ? o.in_len : lognormal(g, 5.3, 1.0, 4, 500);
    const auto max_tokens = o.dataset == "random" ? o.out_len : lognormal(g, 5.0, 0.8, 4, 500);
    std::string body = "{";
    if (o.model) {
      body += "\"model\":";
      json_text::append_string(body, *o.model);
      body += ',';
    }
    const auto prompt = shared + prompt_of(g, words);
    int tenant = -1;
    if (!o.weights.empty()) {
      double x = g.uniform() * o.weight_sum;
      tenant = 0;
      while (tenant + 1 < static_cast<int>(o.weights.size()) && x >= o.weights[static_cast<std::size_t>(tenant)])
        x -= o.weights[static_cast<std::size_t>(tenant++)];
      body += "\"user\":\"tenant-" + std::to_string(tenant) + "\",";
    }
    out.tenant_of.push_back(tenant);
    if (o.endpoint == "/v1/completions") {
      body += "\"prompt\":";
      json_text::append_string(body, prompt);
    } else {
      body += "\"messages\":[{\"role\":\"user\",\"content\":";
      json_text::append_string(body, prompt);
      body += "}]";
    }
    body += ",\"max_tokens\":" + std::to_string(max_tokens) +
            ",\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    out.reqs.push_back({o.endpoint, std::move(body), t, o.auth});
    if (std::isfinite(o.rate)) {
      // Gamma(shape = burstiness) gaps with mean 1/rate: burstiness 1 is
      // Poisson, below 1 burstier.
      const double k = o.burstiness;
      const double x = g.gamma(k);
      t += x / (o.rate * k);
    }
  }
}

// What the responses measured, summed over the requests.
struct bench_totals {
  std::vector<double> ttft, tpot, itl, e2el;
  std::int64_t ok = 0, in_tokens = 0, out_tokens = 0, good = 0, chunks = 0;
  double end = 0;
  std::string first_error;
};

// Times each successful request; counts those within the goodput SLOs.
auto measure(const std::vector<http::load_result>& results, const slo& goal) -> bench_totals {
  bench_totals m;
  for (const auto& r : results) {
    m.end = std::max(m.end, r.end_s);
    if (!r.ok) {
      if (m.first_error.empty()) m.first_error = r.error;
      continue;
    }
    ++m.ok;
    m.in_tokens += r.prompt_tokens;
    m.out_tokens += r.completion_tokens;
    m.chunks += static_cast<std::int64_t>(r.content_s.size());
    // A stream whose tokens all decode to nothing visible: first text = end.
    const double total = (r.end_s - r.start_s) * 1e3;
    const double first = r.content_s.empty() ? total : (r.content_s.front() - r.start_s) * 1e3;
    m.ttft.push_back(first);
    m.e2el.push_back(total);
    const double per_token = r.completion_tokens > 1 ? (total - first) / static_cast<double>(r.completion_tokens - 1) : 0;
    if (r.completion_tokens > 1) m.tpot.push_back(per_token);
    for (std::size_t i = 1; i < r.content_s.size(); ++i) m.itl.push_back((r.content_s[i] - r.content_s[i - 1]) * 1e3);
    if (first <= goal.ttft_ms && per_token <= goal.tpot_ms && total <= goal.e2el_ms) ++m.good;
  }
  return m;
}

// The totals and latency summaries, as `vllm bench serve` prints them.
void print_totals(const bench_options& o, const bench_totals& m, std::size_t requests) {
  const double end = m.end;
  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-34s %10lld\n", "Successful requests:", static_cast<long long>(m.ok));
  std::printf("%-34s %10lld\n", "Failed requests:", static_cast<long long>(static_cast<std::int64_t>(requests) - m.ok));
  std::printf("%-34s %10.2f\n", "Benchmark duration (s):", end);
  std::printf("%-34s %10lld\n", "Total input tokens:", static_cast<long long>(m.in_tokens));
  std::printf("%-34s %10lld\n", "Total generated tokens:", static_cast<long long>(m.out_tokens));
  std::printf("%-34s %10.2f\n", "Request throughput (req/s):", m.ok / end);
  if (o.goodput) std::printf("%-34s %10.2f\n", "Request goodput (req/s):", m.good / end);
  std::printf("%-34s %10.2f\n", "Output token throughput (tok/s):", m.out_tokens / end);
  std::printf("%-34s %10.2f\n", "Total token throughput (tok/s):", (m.in_tokens + m.out_tokens) / end);
  std::printf("%-34s %10.2f\n", "Streamed text events (events/s):", m.chunks / end);
  std::printf("---------------Time to First Token----------------\n");
  print_summary("TTFT", "ms", summarize(m.ttft));
  std::printf("-----Time per Output Token (excl. 1st token)------\n");
  print_summary("TPOT", "ms", summarize(m.tpot));
  std::printf("---------------Inter-token Latency----------------\n");
  print_summary("ITL", "ms", summarize(m.itl));
  std::printf("----------------End-to-end Latency----------------\n");
  print_summary("E2EL", "ms", summarize(m.e2el));
}

// Each tenant's median and P95 time to first token.
void print_tenant_ttft(const std::vector<double>& weights, const std::vector<http::load_result>& results,
                       const std::vector<int>& tenant_of) {
  std::printf("-----------Time to First Token by tenant-----------\n");
  for (int t = 0; t < static_cast<int>(weights.size()); ++t) {
    std::vector<double> v;
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      if (tenant_of[i] != t || !r.ok) continue;
      v.push_back(((r.content_s.empty() ? r.end_s : r.content_s.front()) - r.start_s) * 1e3);
    }
    std::sort(v.begin(), v.end());
    const auto p95 = percentile(v, 0.95);
    std::printf("tenant-%d (weight %g, %zu requests): median TTFT %.2f ms, P95 TTFT %.2f ms\n", t,
                weights[static_cast<std::size_t>(t)], v.size(), summarize(v).median, p95);
  }
}

} // namespace

auto run_bench(std::span<char* const> argv) -> int {
  auto options = trace_flag_names();
  options.insert({"url", "dataset", "request-rate", "burstiness", "max-concurrency", "num-prompts", "goodput",
                  "random-input-len", "random-output-len", "seed", "model", "endpoint", "tenant-weights",
                  "shared-prefix-len", "trace", "api-key"});
  const args a(argv, options, {});
  const auto o = parse_bench_options(a);
  const bool trace = o.dataset == "trace";
  bench_requests w;
  if (trace) add_trace_requests(a, o, w);
  else add_drawn_requests(o, w);

  std::printf("troupe bench: %lld %s prompts to %s%s, request rate %s, burstiness %.2f, max concurrency %s\n",
              static_cast<long long>(w.reqs.size()), o.dataset.c_str(), o.url.c_str(), o.endpoint.c_str(),
              trace ? "from the trace" : o.rate_s.c_str(), o.burstiness,
              o.concurrency > 0 ? std::to_string(o.concurrency).c_str() : "unlimited");
  std::fflush(stdout);
  const auto results = http::run_load(o.host, o.port, w.reqs, o.concurrency);

  const auto m = measure(results, o.goal);
  print_totals(o, m, w.reqs.size());
  if (!o.weights.empty()) print_tenant_ttft(o.weights, results, w.tenant_of);
  std::printf("==================================================\n");
  if (!m.first_error.empty()) std::printf("first failure: %s\n", m.first_error.substr(0, 300).c_str());
  return m.ok == static_cast<std::int64_t>(w.reqs.size()) ? 0 : 1;
}

} // namespace troupe::cli
