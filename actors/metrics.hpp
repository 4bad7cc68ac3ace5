#pragma once
// Every metric of the server in one prometheus-cpp registry, with vLLM's
// names so dashboards carry over, under the prefix "troupe_" (not vLLM's
// "vllm:": `promtool check metrics` rejects colons outside recording rules).
// Counters end in _total. Thread-safe: actors record into it directly.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <string_view>

namespace troupe {

class server_metrics {
  // First: the members below are built into it.
  std::shared_ptr<prometheus::Registry> registry_;
  std::string model_name_;

public:
  /// model_name labels every series; tenant is "default" until tenants land.
  explicit server_metrics(std::string model_name, int num_replicas);

  // Per request, recorded by its sink.
  prometheus::Histogram& time_to_first_token;
  prometheus::Histogram& inter_token_latency;
  prometheus::Histogram& time_per_output_token;
  prometheus::Histogram& e2e_latency;
  prometheus::Histogram& queue_time; ///< recorded by the scheduler
  prometheus::Counter& prompt_tokens;
  prometheus::Counter& generation_tokens;
  /// request_success_total{finished_reason="stop"|"length"|"abort"}.
  auto request_success(std::string_view reason) -> prometheus::Counter&;

  // Per replica, set by its scheduler after every step.
  auto num_requests_running(int replica) -> prometheus::Gauge&;
  auto num_requests_waiting(int replica) -> prometheus::Gauge&;
  auto kv_cache_usage(int replica) -> prometheus::Gauge&;
  auto num_preemptions(int replica) -> prometheus::Counter&;
  // Per device, by its memory manager.
  auto prefix_cache_queries(const std::string& device) -> prometheus::Counter&; ///< blocks looked up
  auto prefix_cache_hits(const std::string& device) -> prometheus::Counter&;    ///< blocks found

  /// The text exposition format (what GET /metrics returns).
  auto serialize() const -> std::string;
};

} // namespace troupe
