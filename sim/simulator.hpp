#pragma once
// The discrete-event simulator: the server's own scheduler core, KV cache
// manager, prefix cache and policies, one set per replica, driven by an
// event queue instead of a clock and a cost model instead of an executor.
// Same scenario and seed, same results, to the byte.

#include "sim/cost_model.hpp"
#include "sim/scenario.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace troupe::sim {

struct request_record {
  double arrival_s = 0;
  double first_token_s = -1; ///< -1: never (refused)
  double finish_s = -1;
  double last_token_s = -1; ///< its latest token so far (the last one, once finished)
  std::int32_t prompt_tokens = 0;
  std::int32_t output_tokens = 0; ///< generated
  std::int32_t tenant = 0;
  std::int32_t replica = 0;
  std::int32_t status = 0; ///< 0: served; 400 or 429: refused at submission
};

struct step_record {
  double start_s = 0, duration_s = 0;
  std::int32_t replica = 0;
  std::int32_t seqs = 0, prefill_tokens = 0, decode_tokens = 0;
  std::int32_t running = 0, waiting = 0; ///< after the step was scheduled
  double kv_use = 0;                     ///< referenced blocks / blocks, after scheduling
};

/// Log-spaced buckets (200 per decade from 1 µs): quantiles within ±0.6%
/// without keeping every inter-token gap of a million requests.
class latency_histogram {
public:
  void add(double seconds) { add_run(seconds, 1); }
  /// add(seconds) n times (a step's decodes mostly share one gap); the
  /// same sum, in the same order, without a memory round trip per value.
  void add_run(double seconds, std::int64_t n);
  auto count() const -> std::int64_t { return count_; }
  auto mean() const -> double { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  auto quantile(double q) const -> double;

private:
  static constexpr int k_per_decade = 200, k_decades = 11;
  std::vector<std::int64_t> buckets_ = std::vector<std::int64_t>(k_per_decade * k_decades + 1, 0);
  std::int64_t count_ = 0;
  double sum_ = 0;
  double last_value_ = -1;
  std::size_t last_bucket_ = 0;
};

struct run_result {
  scenario sc;
  std::string cost_description;
  std::string trace_format;      ///< the trace read, if any
  std::int64_t trace_skipped = 0; ///< its failed requests left out
  std::vector<std::string> tenant_names;
  std::vector<request_record> requests;
  std::vector<step_record> steps;
  latency_histogram itl;
  std::int64_t preemptions = 0, swap_outs = 0;
  std::uint64_t prefix_queries = 0, prefix_hits = 0; ///< full prompt blocks matched (at every admission), found
  double kv_use_time = 0;  ///< ∫ kv use dt, summed over replicas
  double busy_time = 0;    ///< ∫ dt over steps, summed over replicas
  std::vector<double> replica_busy; ///< the same per replica
  double replica_seconds = 0;      ///< ∫ replicas loaded (starting, serving, draining or warm) dt
  std::vector<double> replica_loaded; ///< the same per replica (its seconds loaded)
  struct scale_event {
    double t = 0;
    std::int32_t serving = 0, starting = 0, desired = 0;
    std::string reason;
  };
  std::vector<scale_event> scale_events; ///< the autoscaler's decisions, one per interval
  std::uint64_t prompt_blocks = 0; ///< full prompt blocks submitted (the most the prefix cache could serve)
  double kv_use_peak = 0;
  double end_s = 0;        ///< the last event
};

struct run_options {
  bool keep_steps = true;
  /// Called every so often with (requests done, requests in all).
  std::function<void(std::int64_t, std::int64_t)> progress;
};

/// Runs one scenario to its end. Throws scenario_error for bad input (a
/// trace, a step log, a policy that fails to load).
auto simulate(const scenario& sc, const run_options& options = {}) -> run_result;

} // namespace troupe::sim
