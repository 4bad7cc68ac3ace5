#include "actors/metrics.hpp"

#include <prometheus/text_serializer.h>

#include <stdexcept>

namespace troupe {
namespace {

using prometheus::Histogram;

auto latency_buckets() -> Histogram::BucketBoundaries {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
          0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

auto with(prometheus::Labels l, const prometheus::Labels& more) -> prometheus::Labels {
  for (const auto& [k, v] : more) l.emplace(k, v);
  return l;
}

auto histogram(prometheus::Registry& r, const std::string& name, const std::string& help)
    -> prometheus::Family<Histogram>& {
  return prometheus::BuildHistogram().Name("troupe_" + name).Help(help).Register(r);
}

auto counter(prometheus::Registry& r, const std::string& name, const std::string& help)
    -> prometheus::Family<prometheus::Counter>& {
  return prometheus::BuildCounter().Name("troupe_" + name).Help(help).Register(r);
}

auto gauge(prometheus::Registry& r, const std::string& name, const std::string& help)
    -> prometheus::Family<prometheus::Gauge>& {
  return prometheus::BuildGauge().Name("troupe_" + name).Help(help).Register(r);
}

} // namespace

struct server_metrics::families {
  prometheus::Family<Histogram>*ttft, *itl, *tpot, *e2e;
  prometheus::Family<prometheus::Counter>*prompt, *generation, *hits, *misses, *success;
  // Per replica:
  prometheus::Family<prometheus::Gauge>*running, *waiting, *kv, *swapped, *ready;
  prometheus::Family<prometheus::Counter>*preempt, *swap_outs, *forked, *jumped, *failed_checks;
};

server_metrics::~server_metrics() = default;

auto server_metrics::tenant(const std::string& name) -> request_series& {
  std::lock_guard lock(tenants_mu_);
  auto& slot = tenants_[name];
  if (slot) return *slot;
  const auto l = with(model_, {{"tenant", name}});
  auto& f = *families_;
  slot = std::make_unique<request_series>(request_series{
      &f.ttft->Add(l, latency_buckets()), &f.itl->Add(l, latency_buckets()), &f.tpot->Add(l, latency_buckets()),
      &f.e2e->Add(l, latency_buckets()), &f.prompt->Add(l), &f.generation->Add(l), &f.hits->Add(l),
      &f.misses->Add(l)});
  for (const auto r : {finish_reason::stop, finish_reason::length, finish_reason::abort})
    slot->success[static_cast<std::size_t>(r)] =
        &f.success->Add(with(l, {{"finished_reason", std::string(finish_reason_name(r))}}));
  return *slot;
}

auto server_metrics::tenants() const -> std::vector<const request_series*> {
  std::lock_guard lock(tenants_mu_);
  std::vector<const request_series*> out;
  for (const auto& [n, s] : tenants_) out.push_back(s.get());
  return out;
}

server_metrics::server_metrics(std::shared_ptr<prometheus::Registry> registry, const std::string& model_name,
                               const std::string& version, int num_replicas, const std::vector<std::string>& devices)
  : registry_(registry ? std::move(registry) : std::make_shared<prometheus::Registry>()),
    model_(version.empty() ? prometheus::Labels{{"model_name", model_name}}
                           : prometheus::Labels{{"model_name", model_name}, {"version", version}}),
    queue_time(histogram(*registry_, "request_queue_time_seconds",
                         "Time a request waited before its first step, in seconds.")
                   .Add(model_, latency_buckets())),
    request_retries(counter(*registry_, "request_retries_total",
                            "Requests retried on another replica after theirs failed before their first token.")
                        .Add(model_)),
    request_failures(counter(*registry_, "request_failures_total",
                             "Requests ended by their replica's failure (an error event, or a 503).")
                         .Add(model_)),
    autoscaler_desired(gauge(*registry_, "autoscaler_desired_replicas",
                             "Replicas the autoscaler wants (for an external orchestrator: HPA, KEDA).")
                           .Add(model_)) {
  autoscaler_reason_ = &gauge(*registry_, "autoscaler_decision",
                              "1 for the reason of the autoscaler's last decision, 0 for earlier ones.");
  autoscaler_replicas_ = &gauge(*registry_, "autoscaler_replicas", "The autoscaler's replicas, by state.");
  families_ = std::make_unique<families>(families{
      &histogram(*registry_, "time_to_first_token_seconds", "Time to first token in seconds."),
      &histogram(*registry_, "inter_token_latency_seconds", "Time between successive output tokens in seconds."),
      &histogram(*registry_, "request_time_per_output_token_seconds",
                 "Mean time per output token after the first, per request, in seconds."),
      &histogram(*registry_, "e2e_request_latency_seconds", "End-to-end request latency in seconds."),
      &counter(*registry_, "prompt_tokens_total", "Prefill tokens processed."),
      &counter(*registry_, "generation_tokens_total", "Generation tokens processed."),
      &counter(*registry_, "response_cache_hits_total", "Requests answered from the response cache."),
      &counter(*registry_, "response_cache_misses_total", "Cacheable requests not found in the response cache."),
      &counter(*registry_, "request_success_total", "Finished requests, by finish reason."),
      &gauge(*registry_, "num_requests_running", "Requests in the running batch."),
      &gauge(*registry_, "num_requests_waiting", "Requests waiting to be scheduled."),
      &gauge(*registry_, "kv_cache_usage_perc", "Fraction of the leased KV blocks in use (0 to 1)."),
      &gauge(*registry_, "num_requests_swapped", "Preempted requests whose KV is in host swap space."),
      &gauge(*registry_, "replica_ready",
             "1 while the replica is in the router's rotation (alive, healthy, not draining)."),
      &counter(*registry_, "num_preemptions_total", "Requests preempted for KV blocks."),
      &counter(*registry_, "num_swap_outs_total", "Preemptions that swapped the KV out to host memory."),
      &counter(*registry_, "prompt_tokens_forked_total",
               "Prompt tokens a choice (n > 1, best_of) shared from another choice's KV instead of computing them."),
      &counter(*registry_, "jump_forward_tokens_total",
               "Tokens a grammar forced, appended without a model step (jump-forward)."),
      &counter(*registry_, "health_checks_failed_total", "Deep health checks that failed or timed out.")});
  tenant("default");
  if (num_replicas > 0) replica(num_replicas - 1);
  auto& queries = counter(*registry_, "prefix_cache_queries_total",
                          "Full prompt blocks matched against the prefix cache (hits over queries: the share found).");
  auto& hits = counter(*registry_, "prefix_cache_hits_total", "Full prompt blocks found in the prefix cache.");
  for (const auto& d : devices) {
    const auto l = with(model_, {{"device", d}});
    devices_.push_back({d, {&queries.Add(l), &hits.Add(l)}});
  }
}

void server_metrics::kv_cache_shape(std::string_view dtype, std::int64_t block_bytes, std::int64_t capacity_tokens) {
  gauge(*registry_, "kv_cache_block_bytes",
        "Bytes of one KV block: its tokens' keys and values in every layer, in the cache's type.")
      .Add(with(model_, {{"kv_cache_dtype", std::string(dtype)}}))
      .Set(static_cast<double>(block_bytes));
  gauge(*registry_, "kv_cache_capacity_tokens", "Tokens the KV caches of every device hold together.")
      .Add(model_)
      .Set(static_cast<double>(capacity_tokens));
}

auto server_metrics::replica(int i) const -> const replica_series& {
  std::lock_guard lock(replicas_mu_);
  auto& f = *families_;
  while (replicas_.size() <= static_cast<std::size_t>(i)) {
    const auto l = with(model_, {{"replica", std::to_string(replicas_.size())}});
    replicas_.push_back({&f.running->Add(l), &f.waiting->Add(l), &f.kv->Add(l), &f.preempt->Add(l),
                         &f.swapped->Add(l), &f.swap_outs->Add(l), &f.forked->Add(l), &f.jumped->Add(l),
                         &f.ready->Add(l),
                         &f.failed_checks->Add(l)});
  }
  return replicas_[static_cast<std::size_t>(i)];
}

auto server_metrics::device(const std::string& name) const -> const device_series& {
  for (const auto& [n, s] : devices_)
    if (n == name) return s;
  throw std::invalid_argument("no metrics for device '" + name + "'");
}

void server_metrics::set_autoscaler_reason(const std::string& reason) {
  bool found = false;
  for (auto& [r, g] : reasons_) {
    g->Set(r == reason ? 1.0 : 0.0);
    found = found || r == reason;
  }
  if (found) return;
  reasons_.emplace_back(reason, &autoscaler_reason_->Add(with(model_, {{"reason", reason}})));
  reasons_.back().second->Set(1.0);
}

auto server_metrics::autoscaler_replicas(const std::string& state) -> prometheus::Gauge& {
  return autoscaler_replicas_->Add(with(model_, {{"state", state}}));
}

auto server_metrics::serialize() const -> std::string {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

namespace {

// Raises a counter to a running total kept elsewhere.
void catch_up(prometheus::Counter& c, std::int64_t total) {
  const auto t = static_cast<double>(total);
  if (t > c.Value()) c.Increment(t - c.Value());
}

} // namespace

void server_metrics::replica_series::record(const replica_report& r) const {
  num_requests_running->Set(static_cast<double>(r.running));
  num_requests_waiting->Set(static_cast<double>(r.waiting));
  num_requests_swapped->Set(static_cast<double>(r.swapped));
  kv_cache_usage->Set(r.kv_use);
  catch_up(*num_preemptions, r.num_preemptions);
  catch_up(*num_swap_outs, r.num_swap_outs);
  catch_up(*prompt_tokens_forked, r.forked_tokens);
  catch_up(*jump_forward_tokens, r.jump_forward_tokens);
}

} // namespace troupe
