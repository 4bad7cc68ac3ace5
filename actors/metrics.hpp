#pragma once
// Every metric of the server in one prometheus-cpp registry, with vLLM's
// names so dashboards carry over, under the prefix "troupe_" (not vLLM's
// "vllm:": `promtool check metrics` rejects colons outside recording rules).
// Counters end in _total. Every series is created once, here: recording is
// then a plain (thread-safe) update, with no registry lookup on hot paths.

#include "engine/core/finish_reason.hpp"
#include "engine/core/router_core.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <deque>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

class server_metrics {
  // First: the members below are built into it.
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Labels model_; ///< on every series

public:
  /// A replica scheduler's series, set after every step.
  struct replica_series {
    prometheus::Gauge* num_requests_running;
    prometheus::Gauge* num_requests_waiting;
    prometheus::Gauge* kv_cache_usage;
    prometheus::Counter* num_preemptions;
    prometheus::Gauge* num_requests_swapped; ///< preempted by swap, their KV in host memory
    prometheus::Counter* num_swap_outs;       ///< preemptions that swapped (of num_preemptions)
    prometheus::Counter* prompt_tokens_forked; ///< shared by a choice of n from another's KV
    prometheus::Counter* jump_forward_tokens;  ///< a grammar forced, appended without a model step
    prometheus::Gauge* ready;                 ///< 1 while in the router's rotation (set by the router)
    prometheus::Counter* health_checks_failed; ///< deep checks that failed or timed out

    /// Sets the load gauges, and raises the counters to the scheduler's
    /// running totals (a remote replica's come in its reports).
    void record(const replica_report& r) const;
  };
  /// A device's prefix-cache series, counted by its memory manager.
  struct device_series {
    prometheus::Counter* prefix_cache_queries; ///< blocks looked up
    prometheus::Counter* prefix_cache_hits;    ///< blocks found
  };

  /// Series of one model (labels model_name, and version when not empty) in
  /// `registry`, shared by the models a server serves (null: its own).
  server_metrics(std::shared_ptr<prometheus::Registry> registry, const std::string& model_name,
                 const std::string& version, int num_replicas, const std::vector<std::string>& devices);
  ~server_metrics();
  server_metrics(const server_metrics&) = delete;
  auto operator=(const server_metrics&) -> server_metrics& = delete;

  /// One tenant's request series (label tenant), recorded by the sinks.
  struct request_series {
    prometheus::Histogram* time_to_first_token;
    prometheus::Histogram* inter_token_latency;
    prometheus::Histogram* time_per_output_token;
    prometheus::Histogram* e2e_latency;
    prometheus::Counter* prompt_tokens;
    prometheus::Counter* generation_tokens;
    prometheus::Counter* cache_hits;   ///< response cache
    prometheus::Counter* cache_misses;
    std::array<prometheus::Counter*, 5> success{}; ///< by finish_reason (none and error unused)
    /// request_success_total{finished_reason="stop"|"length"|"abort"}.
    auto request_success(finish_reason r) const -> prometheus::Counter& {
      return *success[static_cast<std::size_t>(r)];
    }
  };
  /// A tenant's series, made on first use ("default" without tenants).
  /// Thread-safe; the reference stays valid for the metrics' life.
  auto tenant(const std::string& name) -> request_series&;
  /// Every tenant's series so far (the autoscaler sums them).
  auto tenants() const -> std::vector<const request_series*>;

  prometheus::Histogram& queue_time; ///< recorded by the scheduler
  /// Requests moved to another replica after theirs failed before their first token.
  prometheus::Counter& request_retries;
  /// Requests ended by their replica's failure (an error event or a 503).
  prometheus::Counter& request_failures;
  /// Replica i's series, made on first use with those of every replica
  /// below it (replicas that join later, a worker's, get the next index).
  /// Thread-safe; the reference stays valid for the metrics' life.
  auto replica(int i) const -> const replica_series&;
  /// The KV cache's shape, set once at start-up: kv_cache_block_bytes{kv_cache_dtype}
  /// (one block's keys and values over every layer) and kv_cache_capacity_tokens
  /// (the tokens every device's cache holds).
  void kv_cache_shape(std::string_view dtype, std::int64_t block_bytes, std::int64_t capacity_tokens);
  /// The series of a device named at construction.
  auto device(const std::string& name) const -> const device_series&;

  /// The autoscaler's series: the replica count it wants, why (one series
  /// per reason phrase, 1 for the current one), its replicas by state.
  prometheus::Gauge& autoscaler_desired;
  void set_autoscaler_reason(const std::string& reason);
  auto autoscaler_replicas(const std::string& state) -> prometheus::Gauge&;

  auto registry() const -> const std::shared_ptr<prometheus::Registry>& { return registry_; }
  /// The text exposition format (what GET /metrics returns): every model's series.
  auto serialize() const -> std::string;

private:
  struct families;
  std::unique_ptr<families> families_;
  mutable std::mutex tenants_mu_;
  std::map<std::string, std::unique_ptr<request_series>> tenants_;
  mutable std::mutex replicas_mu_;
  mutable std::deque<replica_series> replicas_; ///< (a deque: references stay valid as it grows)
  std::vector<std::pair<std::string, device_series>> devices_;
  prometheus::Family<prometheus::Gauge>* autoscaler_reason_ = nullptr;
  prometheus::Family<prometheus::Gauge>* autoscaler_replicas_ = nullptr;
  std::vector<std::pair<std::string, prometheus::Gauge*>> reasons_; ///< (only the autoscaler writes)
};

} // namespace troupe
