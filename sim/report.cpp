#include "sim/report.hpp"

#include "base/json_text.hpp"
#include "base/stats.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <string_view>

namespace troupe::sim {
namespace {

auto summary_of(const std::vector<double>& sorted) -> latency_summary {
  latency_summary s;
  if (sorted.empty()) return s;
  double sum = 0;
  for (const double x : sorted) sum += x;
  s.mean = sum / static_cast<double>(sorted.size());
  s.p50 = percentile(sorted, 0.5);
  s.p90 = percentile(sorted, 0.9);
  s.p99 = percentile(sorted, 0.99);
  return s;
}

auto served(const request_record& q) -> bool { return q.status == 0 && q.finish_s >= 0; }
auto tpot_of(const request_record& q) -> double {
  return q.output_tokens > 1 ? (q.finish_s - q.first_token_s) / (q.output_tokens - 1) : 0;
}

// The served requests' latencies, each list sorted (TPOT: of those with two tokens or more).
struct latencies {
  std::vector<double> ttft, tpot, e2e;
};
auto latencies_of(const run_result& r) -> latencies {
  latencies l;
  for (const auto& q : r.requests) {
    if (!served(q)) continue;
    l.ttft.push_back(q.first_token_s - q.arrival_s);
    l.e2e.push_back(q.finish_s - q.arrival_s);
    if (q.output_tokens > 1) l.tpot.push_back(tpot_of(q));
  }
  for (auto* v : {&l.ttft, &l.tpot, &l.e2e}) std::sort(v->begin(), v->end());
  return l;
}

auto fmt(const char* format, auto... args) -> std::string {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

auto json_string(std::string_view s) -> std::string {
  std::string out;
  json_text::append_string(out, s);
  return out;
}

auto open(const std::filesystem::path& p) -> std::ofstream {
  std::ofstream f(p, std::ios::binary);
  if (!f) throw scenario_error(p.string() + ": cannot write");
  return f;
}

auto xml_text(std::string_view s) -> std::string {
  std::string out;
  for (const char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// A plot: polylines in a box, x and y linear (or x log10), with ticks.
struct plot {
  std::string title, x_label, y_label;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_x = false;
  struct series {
    std::string name, color;
    std::vector<std::pair<double, double>> points;
  };
  std::vector<series> lines;

  auto svg() const -> std::string {
    const double w = 640, h = 400, left = 70, right = 20, top = 40, bottom = 50;
    const auto tx = [&](double x) {
      const double a = log_x ? std::log10(std::max(x, 1e-12)) : x, lo = log_x ? std::log10(x0) : x0,
                   hi = log_x ? std::log10(x1) : x1;
      return left + (a - lo) / (hi - lo) * (w - left - right);
    };
    const auto ty = [&](double y) { return h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom); };
    std::string s = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                        "font-family=\"sans-serif\" font-size=\"12\">\n", w, h);
    s += fmt("<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", w, h);
    s += fmt("<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">", w / 2) + xml_text(title) + "</text>\n";
    s += fmt("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#888\"/>\n", left, top,
             w - left - right, h - top - bottom);
    for (int i = 0; i <= 4; ++i) {
      const double fy = y0 + (y1 - y0) * i / 4;
      s += fmt("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", left - 6, ty(fy) + 4, fy);
      double fx = log_x ? std::pow(10.0, std::log10(x0) + (std::log10(x1) - std::log10(x0)) * i / 4)
                        : x0 + (x1 - x0) * i / 4;
      s += fmt("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.3g</text>\n", tx(fx), h - bottom + 16, fx);
    }
    s += fmt("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", (left + w - right) / 2, h - 12) + x_label + "</text>\n";
    s += fmt("<text x=\"16\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.0f)\">", (top + h - bottom) / 2,
             (top + h - bottom) / 2) + y_label + "</text>\n";
    double legend_y = top + 14;
    for (const auto& l : lines) {
      if (l.points.empty()) continue;
      s += "<polyline fill=\"none\" stroke=\"" + l.color + "\" stroke-width=\"1.5\" points=\"";
      for (const auto& [x, y] : l.points) s += fmt("%.1f,%.1f ", tx(x), ty(y));
      s += "\"/>\n";
      s += fmt("<text x=\"%.0f\" y=\"%.0f\" fill=\"", left + 10, legend_y) + l.color + "\">" + l.name + "</text>\n";
      legend_y += 16;
    }
    return s + "</svg>\n";
  }
};

// At most n evenly spaced points of a CDF over sorted values.
auto cdf_points(const std::vector<double>& sorted, std::size_t n) -> std::vector<std::pair<double, double>> {
  std::vector<std::pair<double, double>> pts;
  if (sorted.empty()) return pts;
  const std::size_t step = std::max<std::size_t>(1, sorted.size() / n);
  for (std::size_t i = 0; i < sorted.size(); i += step)
    pts.emplace_back(sorted[i], static_cast<double>(i + 1) / static_cast<double>(sorted.size()));
  pts.emplace_back(sorted.back(), 1.0);
  return pts;
}

void write_plots(const std::filesystem::path& dir, const run_result& r) {
  const auto [ttft, tpot, e2e] = latencies_of(r);
  plot cdf;
  cdf.title = "Latency CDFs: " + r.sc.name;
  cdf.x_label = "seconds (log scale)";
  cdf.y_label = "fraction of requests";
  cdf.log_x = true;
  double lo = 1e9, hi = 0;
  for (const auto* v : {&ttft, &tpot, &e2e})
    if (!v->empty()) {
      lo = std::min(lo, std::max(v->front(), 1e-6));
      hi = std::max(hi, v->back());
    }
  if (hi <= lo) hi = lo * 10 + 1e-6;
  cdf.x0 = lo;
  cdf.x1 = hi;
  cdf.lines = {{"TTFT", "#1f77b4", cdf_points(ttft, 500)},
               {"TPOT", "#2ca02c", cdf_points(tpot, 500)},
               {"E2E", "#d62728", cdf_points(e2e, 500)}};
  open(dir / "latency_cdf.svg") << cdf.svg();

  plot tl;
  tl.title = "Queue depth and KV use: " + r.sc.name;
  tl.x_label = "simulated seconds";
  tl.y_label = "requests (KV use: fraction x max requests)";
  tl.x0 = 0;
  tl.x1 = std::max(r.end_s, 1e-9);
  double max_q = 1;
  for (const auto& s : r.steps) max_q = std::max<double>(max_q, std::max(s.waiting, s.running));
  tl.y0 = 0;
  tl.y1 = max_q;
  plot::series waiting{"waiting", "#ff7f0e", {}}, running{"running", "#1f77b4", {}}, kv{"KV use", "#9467bd", {}};
  const std::size_t step = std::max<std::size_t>(1, r.steps.size() / 1500);
  for (std::size_t i = 0; i < r.steps.size(); i += step) {
    const auto& s = r.steps[i];
    if (s.replica != 0) continue; // the first replica's; the others are alike under round robin
    waiting.points.emplace_back(s.start_s, s.waiting);
    running.points.emplace_back(s.start_s, s.running);
    kv.points.emplace_back(s.start_s, s.kv_use * max_q);
  }
  tl.lines = {waiting, running, kv};
  open(dir / "timeline.svg") << tl.svg();
}

// Counts the refused and completed requests and sets the throughputs and
// goodput; returns the completed ones' TTFTs by tenant.
auto tally_requests(const run_result& r, run_summary& s) -> std::vector<std::vector<double>> {
  std::vector<std::vector<double>> tenant_ttft(r.tenant_names.size());
  double first = r.requests.empty() ? 0 : r.requests.front().arrival_s;
  std::int64_t out_tokens = 0, in_tokens = 0, good = 0;
  for (const auto& q : r.requests) {
    if (q.status != 0) {
      ++s.refused;
      continue;
    }
    if (!served(q)) continue;
    ++s.completed;
    out_tokens += q.output_tokens;
    in_tokens += q.prompt_tokens;
    const double t = q.first_token_s - q.arrival_s, e = q.finish_s - q.arrival_s, tp = tpot_of(q);
    tenant_ttft[static_cast<std::size_t>(q.tenant)].push_back(t);
    const auto& slo = r.sc.slo;
    if ((slo.ttft_ms <= 0 || t * 1e3 <= slo.ttft_ms) && (slo.tpot_ms <= 0 || tp * 1e3 <= slo.tpot_ms) &&
        (slo.e2e_ms <= 0 || e * 1e3 <= slo.e2e_ms))
      ++good;
  }
  s.duration_s = std::max(r.end_s - first, 1e-9);
  s.request_throughput = static_cast<double>(s.completed) / s.duration_s;
  s.output_throughput = static_cast<double>(out_tokens) / s.duration_s;
  s.total_throughput = static_cast<double>(out_tokens + in_tokens) / s.duration_s;
  s.goodput = static_cast<double>(good) / s.duration_s;
  return tenant_ttft;
}

// Each replica's busy share of the time it was loaded (a replica the
// autoscaler never started counts for nothing): the busiest over the mean,
// or nothing where no replica was busy.
auto replica_load_max_over_mean(const run_result& r) -> std::optional<double> {
  double sum = 0, most = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < r.replica_busy.size() && i < r.replica_loaded.size(); ++i) {
    if (r.replica_loaded[i] <= 0) continue;
    const double u = r.replica_busy[i] / r.replica_loaded[i];
    sum += u;
    most = std::max(most, u);
    ++n;
  }
  if (n > 0 && sum > 0) return most / (sum / static_cast<double>(n));
  return std::nullopt;
}

} // namespace

auto folder_name(const std::string& run) -> std::string {
  std::string out;
  for (const char c : run)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "run" : out;
}

auto summarize(const run_result& r) -> run_summary {
  run_summary s;
  s.name = r.sc.name;
  s.requests = static_cast<std::int64_t>(r.requests.size());
  auto tenant_ttft = tally_requests(r, s);
  const auto l = latencies_of(r);
  s.ttft = summary_of(l.ttft);
  s.tpot = summary_of(l.tpot);
  s.e2e = summary_of(l.e2e);
  s.itl = {r.itl.mean(), r.itl.quantile(0.5), r.itl.quantile(0.9), r.itl.quantile(0.99)};
  s.preemptions = r.preemptions;
  s.swap_outs = r.swap_outs;
  s.prefix_hit_rate = r.prefix_queries ? static_cast<double>(r.prefix_hits) / static_cast<double>(r.prefix_queries) : 0;
  s.cached_prompt_share = r.prompt_blocks ? static_cast<double>(r.prefix_hits) / static_cast<double>(r.prompt_blocks) : 0;
  s.kv_use_mean = r.busy_time > 0 ? r.kv_use_time / r.busy_time : 0;
  s.kv_use_peak = r.kv_use_peak;
  // The replicas ever loaded (an autoscaled fleet's slots may never all be).
  s.replicas = static_cast<std::int64_t>(r.replica_busy.size());
  if (r.sc.autoscaler.enabled())
    s.replicas = std::count_if(r.replica_loaded.begin(), r.replica_loaded.end(), [](double t) { return t > 0; });
  s.replica_seconds = r.replica_seconds;
  s.ttft_p95 = percentile(l.ttft, 0.95);
  if (r.sc.autoscaler.enabled()) {
    s.autoscaler = r.sc.autoscaler.policy;
    s.scale_decisions = static_cast<std::int64_t>(r.scale_events.size());
    for (const auto& e : r.scale_events) s.scale_outs += e.desired > e.serving + e.starting;
  }
  if (const auto load = replica_load_max_over_mean(r)) s.replica_load_max_over_mean = *load;
  for (std::size_t i = 0; i < r.tenant_names.size(); ++i) {
    auto& v = tenant_ttft[i];
    std::sort(v.begin(), v.end());
    s.tenants.push_back({r.tenant_names[i], static_cast<std::int64_t>(v.size()), percentile(v, 0.5), percentile(v, 0.95)});
  }
  return s;
}

void print_summaries(std::FILE* out, const std::vector<run_summary>& runs) {
  std::size_t name_w = 4;
  for (const auto& r : runs) name_w = std::max(name_w, r.name.size());
  const auto w = static_cast<int>(name_w);
  std::fprintf(out, "%-*s %8s %8s %9s %9s %9s %9s %8s %8s %8s %9s %9s %9s %8s %7s %5s %5s\n", w, "run", "done",
               "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p99", "E2E mean",
               "E2E p50", "E2E p99", "goodput", "preempt", "hit%", "KV%");
  for (const auto& r : runs) {
    std::fprintf(out,
                 "%-*s %8lld %8.2f %9.1f %9.1f %9.1f %9.2f %9.2f %8.2f %8.2f %9.1f %9.1f %9.1f %8.2f %7lld %5.1f %5.1f\n",
                 w, r.name.c_str(), static_cast<long long>(r.completed), r.request_throughput, r.output_throughput,
                 r.ttft.p50 * 1e3, r.ttft.p99 * 1e3, r.tpot.p50 * 1e3, r.tpot.p99 * 1e3, r.itl.p50 * 1e3,
                 r.itl.p99 * 1e3, r.e2e.mean * 1e3, r.e2e.p50 * 1e3, r.e2e.p99 * 1e3, r.goodput, static_cast<long long>(r.preemptions),
                 100 * r.prefix_hit_rate, 100 * r.kv_use_mean);
  }
  for (const auto& r : runs) {
    if (r.replicas <= 1) continue;
    std::fprintf(out,
                 "%s: %lld replicas, %.1f%% of prompt blocks found cached, busiest replica at %.2fx the mean "
                 "busy share of its loaded time",
                 r.name.c_str(), static_cast<long long>(r.replicas), 100 * r.cached_prompt_share,
                 r.replica_load_max_over_mean);
    std::fprintf(out, "; %.0f replica-seconds, TTFT p95 %.1f ms", r.replica_seconds, r.ttft_p95 * 1e3);
    if (!r.autoscaler.empty())
      std::fprintf(out, "; autoscaler %s: %lld decisions, %lld asking for more", r.autoscaler.c_str(),
                   static_cast<long long>(r.scale_decisions), static_cast<long long>(r.scale_outs));
    std::fprintf(out, "\n");
  }
  for (const auto& r : runs) {
    if (r.tenants.size() < 2) continue;
    std::fprintf(out, "%s:", r.name.c_str());
    for (const auto& t : r.tenants)
      std::fprintf(out, "  %s %lld requests, TTFT p50 %.1f ms p95 %.1f ms;", t.name.c_str(),
                   static_cast<long long>(t.requests), t.ttft_p50 * 1e3, t.ttft_p95 * 1e3);
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "(times in ms; goodput: requests/s meeting every SLO; hit%%: full prompt blocks found in the "
                    "prefix cache, at every admission; KV%%: mean KV blocks in use while busy)\n");
}

void write_results(const std::filesystem::path& dir, const std::vector<run_result>& runs,
                   const std::vector<run_summary>& summaries) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw scenario_error(dir.string() + ": cannot create the results folder: " + ec.message());
  const auto lat = [](const latency_summary& l) {
    return fmt("{\"mean\": %.6f, \"p50\": %.6f, \"p90\": %.6f, \"p99\": %.6f}", l.mean, l.p50, l.p90, l.p99);
  };
  std::string json = "{\"runs\": [\n";
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    const auto& s = summaries[i];
    json += "  {\"name\": " + json_string(s.name) + ", \"folder\": " + json_string(folder_name(s.name)) +
            ", \"cost_model\": " + json_string(runs[i].cost_description) +
            fmt(", \"requests\": %lld, \"completed\": %lld, \"refused\": %lld, \"duration_s\": %.6f,"
                " \"request_throughput\": %.6f, \"output_throughput\": %.6f, \"total_throughput\": %.6f,"
                " \"goodput\": %.6f,",
                static_cast<long long>(s.requests), static_cast<long long>(s.completed),
                static_cast<long long>(s.refused), s.duration_s, s.request_throughput, s.output_throughput,
                s.total_throughput, s.goodput) +
            "\n   \"ttft_s\": " + lat(s.ttft) + ", \"tpot_s\": " + lat(s.tpot) + ",\n   \"itl_s\": " + lat(s.itl) +
            ", \"e2e_s\": " + lat(s.e2e) +
            fmt(",\n   \"preemptions\": %lld, \"swap_outs\": %lld, \"prefix_hit_rate\": %.6f, \"kv_use_mean\": %.6f,"
                " \"kv_use_peak\": %.6f, \"cached_prompt_share\": %.6f, \"replicas\": %lld,"
                " \"replica_load_max_over_mean\": %.6f, \"replica_seconds\": %.6f, \"ttft_p95_s\": %.6f,"
                " \"scale_decisions\": %lld, \"scale_outs\": %lld, \"tenants\": [",
                static_cast<long long>(s.preemptions), static_cast<long long>(s.swap_outs), s.prefix_hit_rate,
                s.kv_use_mean, s.kv_use_peak, s.cached_prompt_share, static_cast<long long>(s.replicas),
                s.replica_load_max_over_mean, s.replica_seconds, s.ttft_p95, static_cast<long long>(s.scale_decisions),
                static_cast<long long>(s.scale_outs));
    for (std::size_t t = 0; t < s.tenants.size(); ++t)
      json += (t ? ", " : "") + std::string("{\"name\": ") + json_string(s.tenants[t].name) +
              fmt(", \"requests\": %lld, \"ttft_p50_s\": %.6f, \"ttft_p95_s\": %.6f}",
                  static_cast<long long>(s.tenants[t].requests), s.tenants[t].ttft_p50, s.tenants[t].ttft_p95);
    json += std::string("]}") + (i + 1 < summaries.size() ? ",\n" : "\n");
  }
  json += "]}\n";
  open(dir / "summary.json") << json;

  for (const auto& r : runs) {
    const auto sub = dir / folder_name(r.sc.name);
    std::filesystem::create_directories(sub, ec);
    if (ec) throw scenario_error(sub.string() + ": cannot create: " + ec.message());
    {
      auto f = open(sub / "requests.csv");
      f << "id,tenant,replica,status,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n";
      for (std::size_t i = 0; i < r.requests.size(); ++i) {
        const auto& q = r.requests[i];
        const bool ok = served(q);
        f << fmt("%zu,", i) << r.tenant_names[static_cast<std::size_t>(q.tenant)]
          << fmt(",%d,%d,%.6f,%.6f,%.6f,%d,%d,%.6f,%.6f\n", q.replica, q.status, q.arrival_s, q.first_token_s,
                 q.finish_s, q.prompt_tokens, q.output_tokens, ok ? q.first_token_s - q.arrival_s : -1.0,
                 ok ? q.finish_s - q.arrival_s : -1.0);
      }
    }
    {
      auto f = open(sub / "steps.csv");
      f << "start_s,duration_s,replica,seqs,prefill_tokens,decode_tokens,running,waiting,kv_use\n";
      for (const auto& s : r.steps)
        f << fmt("%.6f,%.6f,%d,%d,%d,%d,%d,%d,%.4f\n", s.start_s, s.duration_s, s.replica, s.seqs, s.prefill_tokens,
                 s.decode_tokens, s.running, s.waiting, s.kv_use);
    }
    if (!r.scale_events.empty()) {
      auto f = open(sub / "autoscaler.csv");
      f << "t_s,serving,starting,desired,reason\n";
      for (const auto& e : r.scale_events)
        f << fmt("%.6f,%d,%d,%d,", e.t, e.serving, e.starting, e.desired) << e.reason << "\n";
    }
    write_plots(sub, r);
  }
}

} // namespace troupe::sim
