// `troupe sim SCENARIO.toml`: the discrete-event simulator (sim/); with
// --server-config, of the server a config file describes.

#include "service/server_config.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/replicas.hpp"
#include "cli/trace_flags.hpp"
#include "engine/cuda/cuda_backend.hpp"
#include "sim/cost_model.hpp"
#include "sim/replay.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace troupe::cli {
namespace {

// The bytes a parameter takes as the server reads it: engine.weight_dtype's
// where it quantizes on load, else as stored (the GGUF file, or the
// safetensors files, over the parameters of the shape).
auto weight_bytes(const server_config& cfg, const model_setup& m, const sim::model_shape& shape) -> double {
  if (cfg.engine.weight_dtype == "q8_0") return 34.0 / 32;
  if (cfg.engine.weight_dtype == "q4_k") return 144.0 / 256;
  double bytes = 0;
  std::error_code ec;
  if (m.gguf) {
    bytes = static_cast<double>(std::filesystem::file_size(m.dir, ec));
  } else {
    for (const auto& e : std::filesystem::directory_iterator(m.dir, ec))
      if (e.path().extension() == ".safetensors") bytes += static_cast<double>(e.file_size(ec));
  }
  if (bytes > 0 && !ec) return bytes / sim::parameter_count(shape);
  return m.mc.torch_dtype == "float32" ? 4.0 : 2.0;
}

// The server's fleet, scheduler and routing as the config describes them,
// over `sc` (its traffic, and its cost model where `own_cost`; else the
// roofline of the config's model on `hardware`, or the calibration).
auto from_server_config(const server_config& cfg, sim::scenario sc, bool own_cost, const std::string& hardware,
                        const std::string& calibration) -> sim::scenario {
  if (!cfg.model.more.empty())
    throw std::runtime_error("model.more: the simulator runs one model; simulate each with a config of its own");
  const bool cuda = parse_device(cfg.engine.devices.front()).has_value();
  const auto m = prepare_model(cfg, cuda); // the server's own numbers: KV blocks, context, policies checked
  const auto plan = plan_fleet(cfg, m);    // and its fleet, refused as serve refuses it
  const bool autoscaled = plan.autoscaled;
  if (autoscaled && !cfg.router.weights.empty())
    throw std::runtime_error("router.weights: the simulator's autoscaled replicas are copies of one spec, "
                             "with one weight; simulate weights with a fixed fleet");
  sim::replica_spec spec;
  static_cast<scheduler_config&>(spec) = cfg.scheduler;
  spec.max_model_len = m.max_model_len;
  spec.kv_memory = 0;
  // A fixed fleet's replicas share their device's blocks; each replica the
  // autoscaler starts has a device of its own, and recomputes when preempted.
  spec.kv_blocks = autoscaled ? m.num_blocks : plan.share;
  if (autoscaled) spec.preemption_mode = "recompute";
  spec.host_blocks = spec.preemption_mode == "swap" ? plan.num_host_blocks / cfg.engine.replicas : 0;
  const auto replicas = plan.replicas;
  sc.replicas.clear();
  if (cfg.router.weights.empty()) {
    spec.count = replicas;
    sc.replicas.push_back(spec);
  } else {
    for (std::int32_t i = 0; i < replicas; ++i) { // weighted: one spec per replica index
      spec.count = 1;
      spec.weight = static_cast<std::size_t>(i) < cfg.router.weights.size() ? cfg.router.weights[i] : 1.0;
      sc.replicas.push_back(spec);
    }
  }
  sc.routing = cfg.router.policy;
  auto& as = sc.autoscaler;
  static_cast<autoscaler_config&>(as) = cfg.autoscaler; // every [autoscaler] key, as the server reads it
  as.initial = replicas;
  if (own_cost) return sc;
  auto& shape = sc.cost.model;
  const auto& mc = m.mc;
  shape.layers = mc.num_hidden_layers;
  shape.hidden = mc.hidden_size;
  shape.intermediate = mc.intermediate_size;
  shape.heads = mc.num_attention_heads;
  shape.kv_heads = mc.num_key_value_heads;
  shape.head_dim = mc.head_dim;
  shape.vocab = mc.vocab_size;
  if (mc.is_moe()) {
    shape.experts = mc.num_experts;
    shape.experts_per_token = mc.num_experts_per_tok;
    shape.expert_intermediate = mc.moe_intermediate_size;
  }
  shape.kv_cache_dtype = std::string(kv_dtype_name(m.kv));
  shape.kv_bytes = static_cast<double>(kv_head_bytes(m.kv, mc.head_dim)) / static_cast<double>(mc.head_dim);
  shape.weight_bytes = weight_bytes(cfg, m, shape);
  if (!calibration.empty()) {
    sc.cost.kind = "calibrated";
    sc.cost.step_log = calibration;
  } else {
    sc.cost.kind = "roofline";
    sc.cost.hardware = sim::hardware_preset(hardware.empty() ? (cuda ? "h100" : "cpu") : hardware);
  }
  return sc;
}

// --replay: the step log's decisions replayed against the server's; 1 where
// they differ.
auto replay(const args& a) -> int {
  if (!a.positional().empty()) throw usage_error("--replay takes a step log instead of a scenario");
  const auto r = sim::replay_step_log(a.str("replay", ""));
  if (!r.identical) {
    std::fprintf(stderr, "troupe sim: replay differs at %s\n", r.difference.c_str());
    return 1;
  }
  std::printf("replayed %s: %lld submissions, %lld schedule decisions (%lld steps), all identical to the server's\n",
              a.str("replay", "").c_str(), static_cast<long long>(r.submissions),
              static_cast<long long>(r.schedules), static_cast<long long>(r.steps));
  return 0;
}

// The flags that go together: a usage_error for any that do not.
void check_sim_flags(const args& a, bool server) {
  auto flags = trace_flag_names();
  flags.insert({"trace", "hardware", "calibration", "cold-start-s"});
  for (const auto& o : flags)
    if (a.has(o) && (!server || !a.positional().empty()))
      throw usage_error("--" + o + " goes with --server-config and no scenario (a scenario sets its own)");
  if (a.has("hardware") && a.has("calibration")) throw usage_error("--hardware or --calibration, not both");
  if (server && a.positional().empty() && !a.has("trace"))
    throw usage_error("--server-config needs the traffic: a scenario file, or --trace FILE");
  if (!server && a.positional().empty()) throw usage_error("sim needs a scenario file, e.g. config/sim/chat.toml");
}

// The scenario file's runs, or one run of --trace's traffic.
auto load_runs(const args& a) -> std::vector<sim::scenario> {
  // (A scenario_error reaches main(), which prints "troupe sim: <what>".)
  std::vector<sim::scenario> runs;
  if (!a.positional().empty()) {
    runs = sim::load_scenario(a.positional().front(), a.key_values("set"));
  } else {
    if (!a.key_values("set").empty()) throw usage_error("--set sets a scenario's keys; give a scenario");
    sim::scenario sc;
    sc.name = std::filesystem::path(a.str("server-config", "")).stem().string();
    sc.process = "trace";
    sc.trace = a.str("trace", "");
    apply_trace_flags(a, sc);
    sc.autoscaler.cold_start_s = a.real("cold-start-s", sc.autoscaler.cold_start_s);
    if (!(sc.autoscaler.cold_start_s >= 0)) throw usage_error("--cold-start-s must be >= 0");
    runs.push_back(sc);
  }
  return runs;
}

// One run simulated, with a progress bar where `progress`, and a line on
// stderr of how long it took unless `quiet`.
auto simulate_run(const sim::scenario& sc, bool keep_steps, bool progress, bool quiet) -> sim::run_result {
  sim::run_options o;
  o.keep_steps = keep_steps;
  const auto started = std::chrono::steady_clock::now();
  if (progress)
    o.progress = [&](std::int64_t done, std::int64_t total) {
      const int width = 40, filled = static_cast<int>(width * done / std::max<std::int64_t>(total, 1));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::fprintf(stderr, "\r%-24.24s [%.*s%*s] %lld/%lld requests, %.1f s", sc.name.c_str(), filled,
                   "########################################", width - filled, "", static_cast<long long>(done),
                   static_cast<long long>(total), s);
      if (done >= total) std::fputc('\n', stderr);
    };
  auto r = sim::simulate(sc, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!quiet) {
    std::string trace;
    if (!r.trace_format.empty())
      trace = "; a " + r.trace_format + " trace" +
              (r.trace_skipped > 0 ? ", " + std::to_string(r.trace_skipped) + " failed requests left out" : "");
    std::fprintf(stderr, "%s: %zu requests simulated in %.2f s (%.0f requests/s); %s%s\n", sc.name.c_str(),
                 r.requests.size(), wall, static_cast<double>(r.requests.size()) / std::max(wall, 1e-9),
                 r.cost_description.c_str(), trace.c_str());
  }
  return r;
}

} // namespace

auto run_sim(std::span<char* const> argv) -> int {
  auto options = trace_flag_names();
  options.insert({"out", "set", "replay", "server-config", "trace", "hardware", "calibration", "cold-start-s"});
  const args a(argv, options, {"quiet", "progress"}, 1);
  if (a.has("replay")) return replay(a);
  const bool server = a.has("server-config");
  check_sim_flags(a, server);
  std::vector<sim::scenario> runs = load_runs(a);
  if (server) {
    const auto cfg = load_server_config(a.str("server-config", ""));
    for (auto& sc : runs)
      sc = from_server_config(cfg, sc, !a.positional().empty(), a.str("hardware", ""), a.str("calibration", ""));
  }
  // A progress bar on a terminal (or when asked), on stderr: never part of the results.
  const bool progress = !a.has("quiet") && (a.has("progress") || isatty(STDERR_FILENO));
  std::vector<sim::run_result> results;
  std::vector<sim::run_summary> summaries;
  for (const auto& sc : runs) {
    auto r = simulate_run(sc, a.has("out"), progress, a.has("quiet"));
    summaries.push_back(sim::summarize(r));
    if (a.has("out")) results.push_back(std::move(r));
  }
  sim::print_summaries(stdout, summaries);
  if (a.has("out")) sim::write_results(a.str("out", ""), results, summaries);
  return 0;
}

} // namespace troupe::cli
