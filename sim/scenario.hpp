#pragma once
// A simulation scenario (config/sim/*.toml): the traffic, the replicas with
// their policies and KV budgets, the cost model, the SLOs; and the runs it
// asks for (variants of it, each over a sweep of one key).

#include "engine/core/fleet_lifecycle.hpp"
#include "engine/core/scheduler_config.hpp"
#include "settings/error.hpp"

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace troupe::sim {

/// "key.path: problem", or "file:line: problem" for a trace: the settings
/// reader's error (settings/toml_settings.hpp).
using scenario_error = settings::error;

/// A distribution of token counts.
struct length_dist {
  enum class kind : std::uint8_t { fixed, uniform, lognormal, zipf, sharegpt_prompt, sharegpt_output };
  kind type = kind::fixed;
  std::int64_t value = 128;                 ///< fixed
  std::int64_t min = 1, max = 1 << 20;      ///< every kind is clipped to [min, max]
  double median = 128, sigma = 1;           ///< lognormal
  double s = 1.1;                           ///< zipf exponent: P(n) ∝ n^-s over [min, max]
};

struct tenant_spec {
  std::string name = "default";
  double share = 1;          ///< of the requests, relative to the other tenants'
  std::int32_t priority = 0; ///< its requests' priority
};

/// [[replicas]]: the server's [scheduler] keys (scheduler_config, mapped to
/// the scheduler's limits by the same limits_of()), and how the replica's KV
/// memory is sized. Four defaults differ from the server's: the context
/// (the server's is the model's), the waiting queue, which the simulator
/// leaves unbounded unless a scenario bounds it, and prefill pacing, off
/// unless a scenario sets prefill_chunk_cost (so the published scenarios
/// keep their calibration; --server-config brings the server's 1).
struct replica_spec : scheduler_config {
  replica_spec() {
    max_model_len = 8192;
    max_waiting_requests = 1 << 30;
    max_waiting_tokens = std::int64_t{1} << 50;
    prefill_chunk_cost = 0;
  }
  std::int32_t count = 1;
  std::int32_t kv_blocks = 4096;
  /// > 0: kv_blocks is what this many bytes hold, as the server's
  /// scheduler.kv_memory (needs [model] kv_cache_dtype).
  std::int64_t kv_memory = 0;
  std::int32_t host_blocks = 0;
  double weight = 1.0; ///< capacity weight, for the `weighted` routing policy; > 0
};

/// [autoscaler]: a fleet of replicas[0]'s spec that grows and shrinks.
/// [autoscaler]: the server's [autoscaler] keys (autoscaler_config), and the
/// cold start the simulator gives a started replica. Two defaults differ
/// from the server's: up to 8 replicas, a decision every 10 s.
struct autoscaler_spec : autoscaler_config {
  autoscaler_spec() {
    max_replicas = 8;
    interval_s = 10;
  }
  double cold_start_s = 30;       ///< a started replica takes traffic this much later
  std::int32_t initial = 0;       ///< replicas serving from the start; 0: min_replicas (the server's: its replicas)
  auto initial_replicas() const -> std::int32_t { return initial > 0 ? initial : min_replicas; }
};

/// The model's shape, for the roofline cost model.
struct model_shape {
  std::int64_t layers = 32, hidden = 4096, intermediate = 14336, heads = 32, kv_heads = 8, vocab = 128256;
  std::int64_t head_dim = 0; ///< 0: hidden / heads (Qwen3 and Gemma set their own)
  auto head_size() const -> std::int64_t { return head_dim > 0 ? head_dim : hidden / heads; }
  /// A mixture of experts: each layer's MLP is `experts` MLPs of
  /// expert_intermediate, `experts_per_token` of them a token (0: dense).
  std::int64_t experts = 0, experts_per_token = 0, expert_intermediate = 0;
  double weight_bytes = 2; ///< per parameter
  double kv_bytes = 2;     ///< per cached value
  /// Set: the server's scheduler.kv_cache_dtype ("f32", "bf16", "f16",
  /// "q8_0"), which sets kv_bytes and the blocks a replica's kv_memory holds
  /// by the server's own rule (kv_block_bytes).
  std::string kv_cache_dtype;
};

struct hardware_spec {
  double memory_bandwidth_gbs = 3350; ///< GB/s
  double peak_tflops = 989;           ///< dense, in the weights' type
  double step_overhead_us = 0;        ///< per step, on top of the roofline
};

/// A named hardware spec ([hardware] preset, `troupe sim --hardware`):
/// h100 (the default spec), h200, a100, l40s, l4, cpu (a 2-core machine).
/// Throws scenario_error listing the names for an unknown one.
auto hardware_preset(const std::string& name) -> hardware_spec;
auto hardware_preset_names() -> std::vector<std::string>;

struct cost_spec {
  std::string kind = "roofline"; ///< roofline | calibrated
  std::filesystem::path step_log; ///< calibrated: `troupe serve --step-log` output
  model_shape model;
  hardware_spec hardware;
};

struct slo_spec {
  double ttft_ms = 0, tpot_ms = 0, e2e_ms = 0; ///< 0: no objective
};

struct scenario {
  std::string name = "base"; ///< the run's name: the variant's, with the sweep value
  std::uint64_t seed = 1;
  std::int64_t num_requests = 1000;
  // [arrival]
  std::string process = "poisson"; ///< poisson | gamma | constant | all_at_once | trace
  double rate = 10;                ///< requests per second
  double cv = 1;                   ///< gamma: coefficient of variation of the gaps
  std::filesystem::path trace;     ///< trace: a file (sim/trace.hpp)
  std::string trace_format = "auto"; ///< auto, troupe, azure, burstgpt, mooncake
  double time_scale = 1;           ///< a trace's arrival times are multiplied by it
  std::int64_t max_rows = 0;       ///< a trace's first this many requests (0: all)
  std::int32_t trace_block_tokens = 512; ///< a Mooncake trace's tokens per hash id
  // [lengths]
  length_dist prompt{length_dist::kind::sharegpt_prompt};
  length_dist output{length_dist::kind::sharegpt_output};
  std::vector<tenant_spec> tenants{tenant_spec{}};
  // [prefix]: shared prefixes (system prompts)
  std::int32_t prefix_groups = 0;
  std::int32_t prefix_tokens = 0;
  double prefix_fraction = 1; ///< of the requests, that start with a group's prefix
  // [chat]: multi-turn conversations. Each arrival starts one; every later
  // turn comes a think time after the previous answer, its prompt the whole
  // conversation so far plus a new message (drawn from lengths.prompt), so
  // the prefix cache finds the earlier turns.
  length_dist turns{length_dist::kind::fixed, 1}; ///< turns per conversation
  double think_s = 0;                             ///< mean (exponential) think time
  std::vector<replica_spec> replicas{replica_spec{}};
  std::string routing = "round_robin"; ///< a routing policy's name (policies/registry.hpp)
  autoscaler_spec autoscaler;
  cost_spec cost;
  slo_spec slo;
};

/// One "section.key=value" override (TOML value syntax; bare text is a string).
using scenario_override = std::pair<std::string, std::string>;

/// Reads a scenario file, applies the overrides, and returns its runs: one
/// per variant ([[variants]], each a name and a table of overrides; none:
/// the base) times each value of [sweep] (a key and its values). Relative
/// paths in it are taken from the file's folder. Throws scenario_error.
auto load_scenario(const std::filesystem::path& file, const std::vector<scenario_override>& overrides = {})
    -> std::vector<scenario>;
/// The same from text (`origin` names it in errors; paths relative to `dir`).
auto parse_scenario(std::string_view text, const std::string& origin, const std::filesystem::path& dir,
                    const std::vector<scenario_override>& overrides = {}) -> std::vector<scenario>;

} // namespace troupe::sim
