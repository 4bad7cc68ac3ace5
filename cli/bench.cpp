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

} // namespace

auto run_bench(std::span<char* const> argv) -> int {
  auto options = trace_flag_names();
  options.insert({"url", "dataset", "request-rate", "burstiness", "max-concurrency", "num-prompts", "goodput",
                  "random-input-len", "random-output-len", "seed", "model", "endpoint", "tenant-weights",
                  "shared-prefix-len", "trace", "api-key"});
  const args a(argv, options, {});
  const std::string url = a.str("url", "http://127.0.0.1:8080");
  const std::string prefix = "http://";
  if (!url.starts_with(prefix)) throw usage_error("--url must start with http://");
  const auto hostport = url.substr(prefix.size(), url.find('/', prefix.size()) - prefix.size());
  const auto colon = hostport.rfind(':');
  const std::string host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  const auto port = static_cast<std::uint16_t>(colon == std::string::npos ? 80 : std::stoi(hostport.substr(colon + 1)));
  const std::string dataset = a.str("dataset", "random");
  if (dataset != "random" && dataset != "sharegpt-like" && dataset != "trace")
    throw usage_error("--dataset is random, sharegpt-like or trace");
  if ((dataset == "trace") != a.has("trace")) throw usage_error("--dataset trace goes with --trace FILE");
  for (const auto& f : trace_flag_names())
    if (a.has(f) && dataset != "trace") throw usage_error("--" + f + " goes with --dataset trace");
  const std::string rate_s = a.str("request-rate", "inf");
  const double rate = rate_s == "inf" ? std::numeric_limits<double>::infinity() : a.real("request-rate", 1.0);
  const double burstiness = a.real("burstiness", 1.0);
  const auto concurrency = static_cast<int>(a.integer("max-concurrency", 0));
  const auto n = a.integer("num-prompts", 100);
  const auto in_len = a.integer("random-input-len", 128);
  const auto out_len = a.integer("random-output-len", 128);
  const std::string endpoint = a.str("endpoint", "/v1/completions");
  if (rate <= 0 || burstiness <= 0 || concurrency < 0 || n < 1 || in_len < 1 || out_len < 1)
    throw usage_error("--request-rate, --burstiness, --num-prompts and the lengths must be positive");
  if (endpoint != "/v1/completions" && endpoint != "/v1/chat/completions")
    throw usage_error("--endpoint is /v1/completions or /v1/chat/completions");
  const slo goal = a.has("goodput") ? parse_goodput(a.str("goodput", "")) : slo{};
  // Tenants (sent as `user`), drawn with these relative weights; and a
  // prefix of words every prompt shares (a system prompt).
  std::vector<double> weights;
  if (a.has("tenant-weights"))
    for (const int w : parse_list(a.str("tenant-weights", ""), "tenant-weights")) weights.push_back(w);
  double weight_sum = 0;
  for (const double w : weights) weight_sum += w;
  if (!weights.empty() && weight_sum <= 0) throw usage_error("--tenant-weights needs a positive weight");
  const auto shared_words = a.integer("shared-prefix-len", 0);
  if (shared_words < 0) throw usage_error("--shared-prefix-len must be >= 0");

  // The workload: prompts and their arrival times, from one seeded stream.
  rng g(static_cast<std::uint64_t>(a.integer("seed", 0)));
  rng prefix_rng(12345);
  const std::string shared = shared_words > 0 ? prompt_of(prefix_rng, shared_words) + " " : "";
  std::vector<http::load_request> reqs;
  // A tenant's key (server.tenants), sent with every request.
  const auto key = a.str("api-key", "");
  const std::string auth = key.empty() ? "" : "Authorization: Bearer " + key + "\r\n";
  std::vector<int> tenant_of;
  double t = 0;
  // A trace (the simulator's CSV): each request at its time, its prompt as
  // token ids of exactly its length (a group's first --shared-prefix-len
  // shared), its output exactly its length; its tenant as `user`. With
  // logprobs 0 every token is an event, so each is timed, even one whose
  // text is not complete yet (ITL per token, as the simulator counts it).
  std::optional<sim::workload> trace;
  sim::scenario trace_scenario;
  if (dataset == "trace") {
    trace_scenario.process = "trace";
    trace_scenario.trace = a.str("trace", "");
    trace_scenario.prefix_tokens = static_cast<std::int32_t>(shared_words);
    trace_scenario.cost.model.vocab = 1000; // ids every preset's tokenizer has
    trace_scenario.seed = static_cast<std::uint64_t>(a.integer("seed", 0));
    apply_trace_flags(a, trace_scenario);
    trace.emplace(trace_scenario); // a scenario_error names the line; main() prints it
    std::vector<token_id> ids;
    while (auto q = trace->next()) {
      trace->prompt_of(*q, ids);
      std::string body = "{\"prompt\":[";
      for (std::size_t i = 0; i < ids.size(); ++i) body += (i ? "," : "") + std::to_string(ids[i]);
      body += "],\"max_tokens\":" + std::to_string(q->output_tokens) + ",\"priority\":" + std::to_string(q->priority);
      if (q->tenant > 0) {
        body += ",\"user\":";
        json_text::append_string(body, trace->tenant_names()[static_cast<std::size_t>(q->tenant)]);
      }
      body += ",\"logprobs\":0,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
      reqs.push_back({"/v1/completions", std::move(body), q->arrival_s, auth});
      tenant_of.push_back(-1);
    }
  }
  for (std::int64_t i = 0; i < (trace ? 0 : n); ++i) {
    const auto words = dataset == "random" ? in_len : lognormal(g, 5.3, 1.0, 4, 500);
    const auto max_tokens = dataset == "random" ? out_len : lognormal(g, 5.0, 0.8, 4, 500);
    std::string body = "{";
    if (a.has("model")) {
      body += "\"model\":";
      json_text::append_string(body, a.str("model", ""));
      body += ',';
    }
    const auto prompt = shared + prompt_of(g, words);
    int tenant = -1;
    if (!weights.empty()) {
      double x = g.uniform() * weight_sum;
      tenant = 0;
      while (tenant + 1 < static_cast<int>(weights.size()) && x >= weights[static_cast<std::size_t>(tenant)])
        x -= weights[static_cast<std::size_t>(tenant++)];
      body += "\"user\":\"tenant-" + std::to_string(tenant) + "\",";
    }
    tenant_of.push_back(tenant);
    if (endpoint == "/v1/completions") {
      body += "\"prompt\":";
      json_text::append_string(body, prompt);
    } else {
      body += "\"messages\":[{\"role\":\"user\",\"content\":";
      json_text::append_string(body, prompt);
      body += "}]";
    }
    body += ",\"max_tokens\":" + std::to_string(max_tokens) +
            ",\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    reqs.push_back({endpoint, std::move(body), t, auth});
    if (std::isfinite(rate)) {
      // Gamma(shape = burstiness) gaps with mean 1/rate: burstiness 1 is
      // Poisson, below 1 burstier.
      const double k = burstiness;
      const double x = g.gamma(k);
      t += x / (rate * k);
    }
  }

  std::printf("troupe bench: %lld %s prompts to %s%s, request rate %s, burstiness %.2f, max concurrency %s\n",
              static_cast<long long>(reqs.size()), dataset.c_str(), url.c_str(), endpoint.c_str(),
              trace ? "from the trace" : rate_s.c_str(), burstiness,
              concurrency > 0 ? std::to_string(concurrency).c_str() : "unlimited");
  std::fflush(stdout);
  const auto results = http::run_load(host, port, reqs, concurrency);

  std::vector<double> ttft, tpot, itl, e2el;
  std::int64_t ok = 0, in_tokens = 0, out_tokens = 0, good = 0, chunks = 0;
  double end = 0;
  std::string first_error;
  for (const auto& r : results) {
    end = std::max(end, r.end_s);
    if (!r.ok) {
      if (first_error.empty()) first_error = r.error;
      continue;
    }
    ++ok;
    in_tokens += r.prompt_tokens;
    out_tokens += r.completion_tokens;
    chunks += static_cast<std::int64_t>(r.content_s.size());
    // A stream whose tokens all decode to nothing visible: first text = end.
    const double total = (r.end_s - r.start_s) * 1e3;
    const double first = r.content_s.empty() ? total : (r.content_s.front() - r.start_s) * 1e3;
    ttft.push_back(first);
    e2el.push_back(total);
    const double per_token = r.completion_tokens > 1 ? (total - first) / static_cast<double>(r.completion_tokens - 1) : 0;
    if (r.completion_tokens > 1) tpot.push_back(per_token);
    for (std::size_t i = 1; i < r.content_s.size(); ++i) itl.push_back((r.content_s[i] - r.content_s[i - 1]) * 1e3);
    if (first <= goal.ttft_ms && per_token <= goal.tpot_ms && total <= goal.e2el_ms) ++good;
  }
  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-34s %10lld\n", "Successful requests:", static_cast<long long>(ok));
  std::printf("%-34s %10lld\n", "Failed requests:", static_cast<long long>(static_cast<std::int64_t>(reqs.size()) - ok));
  std::printf("%-34s %10.2f\n", "Benchmark duration (s):", end);
  std::printf("%-34s %10lld\n", "Total input tokens:", static_cast<long long>(in_tokens));
  std::printf("%-34s %10lld\n", "Total generated tokens:", static_cast<long long>(out_tokens));
  std::printf("%-34s %10.2f\n", "Request throughput (req/s):", ok / end);
  if (a.has("goodput")) std::printf("%-34s %10.2f\n", "Request goodput (req/s):", good / end);
  std::printf("%-34s %10.2f\n", "Output token throughput (tok/s):", out_tokens / end);
  std::printf("%-34s %10.2f\n", "Total token throughput (tok/s):", (in_tokens + out_tokens) / end);
  std::printf("%-34s %10.2f\n", "Streamed text events (events/s):", chunks / end);
  std::printf("---------------Time to First Token----------------\n");
  print_summary("TTFT", "ms", summarize(ttft));
  std::printf("-----Time per Output Token (excl. 1st token)------\n");
  print_summary("TPOT", "ms", summarize(tpot));
  std::printf("---------------Inter-token Latency----------------\n");
  print_summary("ITL", "ms", summarize(itl));
  std::printf("----------------End-to-end Latency----------------\n");
  print_summary("E2EL", "ms", summarize(e2el));
  if (!weights.empty()) {
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
  std::printf("==================================================\n");
  if (!first_error.empty()) std::printf("first failure: %s\n", first_error.substr(0, 300).c_str());
  return ok == static_cast<std::int64_t>(reqs.size()) ? 0 : 1;
}

} // namespace troupe::cli
