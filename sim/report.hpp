#pragma once
// What a simulation reports: a summary per run (printed as one table), and a
// results folder with summary.json, per-request and per-step CSV files, and
// SVG plots (latency CDFs; queue depth and KV use over time).

#include "sim/simulator.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace troupe::sim {

struct latency_summary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0; ///< seconds
};

struct tenant_summary {
  std::string name;
  std::int64_t requests = 0;
  double ttft_p50 = 0, ttft_p95 = 0;
};

struct run_summary {
  std::string name;
  std::int64_t requests = 0, completed = 0, refused = 0;
  double duration_s = 0; ///< first arrival to last event
  double request_throughput = 0, output_throughput = 0, total_throughput = 0; ///< per second
  double goodput = 0; ///< completed requests per second that met every SLO
  latency_summary ttft, tpot, itl, e2e;
  std::int64_t preemptions = 0, swap_outs = 0;
  double prefix_hit_rate = 0; ///< of the full prompt blocks matched
  double cached_prompt_share = 0; ///< prompt blocks found cached, of all full prompt blocks submitted
  double kv_use_mean = 0, kv_use_peak = 0;
  std::int64_t replicas = 1;
  double replica_seconds = 0;     ///< replicas loaded, integrated over the run
  double ttft_p95 = 0;
  std::string autoscaler;         ///< its policy, "" for a fixed fleet
  std::int64_t scale_decisions = 0, scale_outs = 0; ///< decisions taken, those asking for more
  double replica_load_max_over_mean = 1; ///< busy time of the busiest replica over the mean
  std::vector<tenant_summary> tenants;
};

auto summarize(const run_result& r) -> run_summary;

/// The runs as one table (times in ms).
void print_summaries(std::FILE* out, const std::vector<run_summary>& runs);

/// Writes dir/summary.json and, per run, dir/<run>/requests.csv, steps.csv,
/// latency_cdf.svg and timeline.svg. Throws scenario_error if it cannot.
void write_results(const std::filesystem::path& dir, const std::vector<run_result>& runs,
                   const std::vector<run_summary>& summaries);

/// A run's name as a folder name: letters, digits, '.', '-' and '_'.
auto folder_name(const std::string& run) -> std::string;

} // namespace troupe::sim
