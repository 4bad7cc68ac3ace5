#include "sim/scenario.hpp"

#include "sim/trace.hpp"
#include "settings/toml_settings.hpp"

#include "engine/core/kv_dtype.hpp"

#include "policies/loader.hpp"
#include "policies/registry.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace troupe::sim {
namespace {

using settings::fail;
using settings::joined;
using reader = settings::table_reader;

/// A policy's name: a built-in one (`known`), or a plug-in's path.
void read_policy(reader& r, std::string_view key, std::string& out, const std::vector<std::string>& known,
                 std::string_view what) {
  r.text(key, out);
  if (!policy::names_a_library(out)) settings::one_of(out, known, r.path(key), what);
}

/// A path key, relative to the scenario's folder.
void read_file_key(reader& r, std::string_view key, std::filesystem::path& out, const std::filesystem::path& dir) {
  std::string s;
  r.text(key, s);
  if (!s.empty()) out = dir / s;
}

void read_length(reader& parent, std::string_view key, length_dist& d) {
  const auto* n = parent.at(key);
  if (n == nullptr) return;
  const auto where = parent.path(key);
  if (n->is_integer()) {
    d = {};
    d.type = length_dist::kind::fixed;
    d.value = n->as_integer()->get();
    if (d.value < 1) fail(where, "must be >= 1, got " + std::to_string(d.value));
    return;
  }
  if (!n->is_table()) fail(where, "expected an integer or a table like { dist = \"lognormal\", median = 150, sigma = 0.8 }, got " + settings::type_name(*n));
  reader r(*n->as_table(), where);
  std::string dist;
  r.text("dist", dist, {"fixed", "uniform", "lognormal", "zipf", "sharegpt"});
  if (dist.empty()) fail(where + ".dist", "missing; one of fixed, uniform, lognormal, zipf, sharegpt");
  d = {};
  const bool is_prompt = key == "prompt";
  if (dist == "fixed") d.type = length_dist::kind::fixed;
  if (dist == "uniform") d.type = length_dist::kind::uniform;
  if (dist == "lognormal") d.type = length_dist::kind::lognormal;
  if (dist == "zipf") d.type = length_dist::kind::zipf;
  if (dist == "sharegpt") d.type = is_prompt ? length_dist::kind::sharegpt_prompt : length_dist::kind::sharegpt_output;
  r.integer("min", d.min, 1);
  r.integer("max", d.max, 1);
  if (d.type == length_dist::kind::fixed) r.integer("value", d.value, 1);
  if (d.type == length_dist::kind::lognormal) {
    r.number("median", d.median, 0, true);
    r.number("sigma", d.sigma, 0);
  }
  if (d.type == length_dist::kind::zipf) {
    r.number("s", d.s, 0, true);
    if (d.max > 1'000'000) fail(where + ".max", "zipf needs max <= 1000000");
  }
  if (d.min > d.max) fail(where, "min (" + std::to_string(d.min) + ") is over max (" + std::to_string(d.max) + ")");
  r.finish();
}

/// [arrival]: the arrival process, or the trace the requests come from.
void read_arrival(reader& top, scenario& sc, const std::filesystem::path& dir) {
  if (auto r = top.table("arrival")) {
    r->text("process", sc.process, {"poisson", "gamma", "constant", "all_at_once", "trace"});
    r->number("rate", sc.rate, 0, true);
    r->number("cv", sc.cv, 0, true);
    read_file_key(*r, "trace", sc.trace, dir);
    r->text("trace_format", sc.trace_format, trace_format_names());
    r->number("time_scale", sc.time_scale, 0, true);
    r->integer("max_rows", sc.max_rows, 0);
    r->integer("trace_block_tokens", sc.trace_block_tokens, 1, 1 << 20);
    r->finish();
  }
  if (sc.process == "trace" && sc.trace.empty()) fail("arrival.trace", "missing: the process \"trace\" needs a trace file");
}

/// [[tenants]], where given: each one's name, share and priority.
void read_tenants(reader& top, scenario& sc) {
  std::vector<tenant_spec> tenants;
  top.tables("tenants", [&](reader& r, std::size_t i) {
    tenant_spec s;
    s.name = "tenant-" + std::to_string(i);
    r.text("name", s.name);
    r.number("share", s.share, 0, true);
    r.integer("priority", s.priority, -1'000'000, 1'000'000);
    tenants.push_back(s);
  });
  if (!tenants.empty()) sc.tenants = tenants;
}

/// [chat]: conversations' turns and think time (not with a trace).
void read_chat(reader& top, scenario& sc) {
  if (auto r = top.table("chat")) {
    read_length(*r, "turns", sc.turns);
    r->number("think_s", sc.think_s, 0);
    r->finish();
  }
  if (sc.process == "trace" && !(sc.turns.type == length_dist::kind::fixed && sc.turns.value == 1))
    fail("chat.turns", "a trace gives every request itself; conversations come from the generated processes");
}

/// One [[replicas]] table.
auto read_replica(reader& r, const std::vector<std::string>& scheduling, const std::vector<std::string>& eviction)
    -> replica_spec {
  replica_spec s;
  r.integer("count", s.count, 1, 4096);
  read_policy(r, "policy", s.policy, scheduling, "scheduling policy");
  r.text("eviction", s.eviction, eviction);
  r.integer("kv_blocks", s.kv_blocks, 1);
  r.integer("kv_memory", s.kv_memory, 1);
  if (s.kv_memory > 0 && r.at("kv_blocks") != nullptr)
    fail(r.path("kv_memory"), "and kv_blocks both set: give one");
  r.integer("block_size", s.block_size, 1, 1024);
  r.integer("max_num_seqs", s.max_num_seqs, 1);
  r.integer("max_num_batched_tokens", s.max_num_batched_tokens, 1);
  r.integer("max_model_len", s.max_model_len, 1);
  r.integer("max_waiting_requests", s.max_waiting_requests, 1);
  r.integer("max_waiting_tokens", s.max_waiting_tokens, 1);
  r.integer("max_input_tokens", s.max_input_tokens, 0);
  r.integer("max_output_tokens", s.max_output_tokens, 0);
  r.integer("long_prefill_token_threshold", s.long_prefill_token_threshold, 0);
  r.integer("max_num_partial_prefills", s.max_num_partial_prefills, 0);
  r.number("prefill_chunk_cost", s.prefill_chunk_cost, 0);
  r.integer("watermark_blocks", s.watermark_blocks, 0);
  r.boolean("enable_prefix_caching", s.enable_prefix_caching);
  r.text("preemption_mode", s.preemption_mode, {"recompute", "swap"});
  r.integer("host_blocks", s.host_blocks, 0);
  r.number("weight", s.weight, 0, true);
  if (s.kv_memory == 0 && s.watermark_blocks >= s.kv_blocks)
    fail(r.path("watermark_blocks"), "leaves no KV block for admissions");
  return s;
}

/// [[replicas]], where given.
void read_replicas(reader& top, scenario& sc) {
  std::vector<replica_spec> replicas;
  auto scheduling = policy::scheduling_policy_names();
  auto eviction = policy::eviction_policy_names();
  top.tables("replicas", [&](reader& r, std::size_t) { replicas.push_back(read_replica(r, scheduling, eviction)); });
  if (!replicas.empty()) sc.replicas = replicas;
}

/// [autoscaler]: its policy and bounds.
void read_autoscaler(reader& top, scenario& sc) {
  if (auto r = top.table("autoscaler")) {
    auto& a = sc.autoscaler;
    auto names = policy::autoscaling_policy_names();
    names.insert(names.begin(), "none");
    r->text("policy", a.policy, names);
    r->number("target", a.target, 0);
    r->integer("min_replicas", a.min_replicas, 1);
    r->integer("max_replicas", a.max_replicas, 1, 4096);
    r->number("interval_s", a.interval_s, 0, true);
    r->number("cold_start_s", a.cold_start_s, 0);
    r->number("scale_in_delay_s", a.scale_in_delay_s, 0);
    r->integer("warm_pool", a.warm_pool, 0);
    if (a.min_replicas > a.max_replicas)
      fail(r->path("min_replicas"), "(" + std::to_string(a.min_replicas) + ") is over max_replicas (" +
                                        std::to_string(a.max_replicas) + ")");
    r->finish();
  }
}

/// [cost]: which cost model, and the step log a calibrated one is fitted to.
void read_cost(reader& top, scenario& sc, const std::filesystem::path& dir) {
  if (auto r = top.table("cost")) {
    r->text("kind", sc.cost.kind, {"roofline", "calibrated"});
    read_file_key(*r, "step_log", sc.cost.step_log, dir);
    r->finish();
  }
  if (sc.cost.kind == "calibrated" && sc.cost.step_log.empty())
    fail("cost.step_log", "missing: the calibrated cost model is fitted to a `troupe serve --step-log` file");
}

/// [model]: the model's shape, and the bytes a cached value takes.
void read_model(reader& top, scenario& sc) {
  if (auto r = top.table("model")) {
    auto& m = sc.cost.model;
    r->integer("layers", m.layers, 1);
    r->integer("hidden", m.hidden, 1);
    r->integer("intermediate", m.intermediate, 1);
    r->integer("heads", m.heads, 1);
    r->integer("kv_heads", m.kv_heads, 1);
    r->integer("vocab", m.vocab, 2, std::numeric_limits<std::int32_t>::max()); // token ids are 32-bit
    r->integer("head_dim", m.head_dim, 1);
    r->integer("experts", m.experts, 1);
    r->integer("experts_per_token", m.experts_per_token, 1);
    r->integer("expert_intermediate", m.expert_intermediate, 1);
    if ((m.experts > 0) != (m.experts_per_token > 0) || (m.experts > 0) != (m.expert_intermediate > 0))
      fail("model.experts", "a mixture of experts gives experts, experts_per_token and expert_intermediate together");
    if (m.experts_per_token > m.experts) fail("model.experts_per_token", "must be at most model.experts");
    r->number("weight_bytes", m.weight_bytes, 0, true);
    r->number("kv_bytes", m.kv_bytes, 0, true);
    r->text("kv_cache_dtype", m.kv_cache_dtype, {"f32", "bf16", "f16", "q8_0"});
    if (m.head_dim == 0 && m.hidden % m.heads != 0) fail("model.heads", "must divide model.hidden (or give model.head_dim)");
    if (m.heads % m.kv_heads != 0) fail("model.kv_heads", "must divide model.heads");
    if (!m.kv_cache_dtype.empty()) {
      if (r->at("kv_bytes") != nullptr) fail("model.kv_cache_dtype", "and model.kv_bytes both set: give one");
      const auto head_dim = m.head_size();
      const auto t = *parse_kv_dtype(m.kv_cache_dtype);
      if (!kv_dtype_fits(t, head_dim))
        fail("model.kv_cache_dtype", "\"q8_0\" stores blocks of 32 values; head_dim " + std::to_string(head_dim) +
                                         " is not a multiple of 32");
      m.kv_bytes = static_cast<double>(kv_head_bytes(t, head_dim)) / static_cast<double>(head_dim);
    }
    r->finish();
  }
}

/// A replica's kv_memory in blocks, by the server's rule.
void resolve_kv_memory(scenario& sc) {
  for (std::size_t i = 0; i < sc.replicas.size(); ++i) {
    auto& s = sc.replicas[i];
    if (s.kv_memory == 0) continue;
    const auto where = "replicas[" + std::to_string(i) + "].kv_memory";
    const auto& m = sc.cost.model;
    if (m.kv_cache_dtype.empty()) fail(where, "needs model.kv_cache_dtype (the bytes a cached value takes)");
    const auto bytes = kv_block_bytes(*parse_kv_dtype(m.kv_cache_dtype), m.layers, m.kv_heads, m.head_size(),
                                      s.block_size);
    const auto blocks = s.kv_memory / bytes;
    if (blocks < 1 || blocks > std::numeric_limits<std::int32_t>::max())
      fail(where, std::to_string(s.kv_memory) + " bytes hold " + std::to_string(blocks) + " KV blocks of " +
                      std::to_string(bytes) + " bytes");
    s.kv_blocks = static_cast<std::int32_t>(blocks);
    if (s.watermark_blocks >= s.kv_blocks)
      fail("replicas[" + std::to_string(i) + "].watermark_blocks", "leaves no KV block for admissions");
  }
}

/// [hardware]: a preset, its keys overridden by any given.
void read_hardware(reader& top, scenario& sc) {
  if (auto r = top.table("hardware")) {
    auto& h = sc.cost.hardware;
    std::string preset;
    r->text("preset", preset, hardware_preset_names());
    if (!preset.empty()) h = hardware_preset(preset); // its keys below override the preset's
    r->number("memory_bandwidth_gbs", h.memory_bandwidth_gbs, 0, true);
    r->number("peak_tflops", h.peak_tflops, 0, true);
    r->number("step_overhead_us", h.step_overhead_us, 0);
    r->finish();
  }
}

auto read_scenario(const toml::table& t, const std::string& name, const std::filesystem::path& dir) -> scenario {
  scenario sc;
  sc.name = name;
  reader top(t, "");
  if (auto r = top.table("sim")) {
    r->integer("seed", sc.seed, 0);
    r->integer("num_requests", sc.num_requests, 1, 50'000'000); // a record each: ~3 GB at most
    r->finish();
  }
  read_arrival(top, sc, dir);
  if (auto r = top.table("lengths")) {
    read_length(*r, "prompt", sc.prompt);
    read_length(*r, "output", sc.output);
    r->finish();
  }
  read_tenants(top, sc);
  if (auto r = top.table("prefix")) {
    r->integer("groups", sc.prefix_groups, 0);
    r->integer("tokens", sc.prefix_tokens, 0);
    r->number("fraction", sc.prefix_fraction, 0);
    if (sc.prefix_fraction > 1) fail("prefix.fraction", "must be <= 1, got " + settings::show_number(sc.prefix_fraction));
    r->finish();
  }
  read_chat(top, sc);
  read_replicas(top, sc);
  if (auto r = top.table("routing")) {
    read_policy(*r, "policy", sc.routing, policy::routing_policy_names(), "value");
    r->finish();
  }
  read_autoscaler(top, sc);
  read_cost(top, sc, dir);
  read_model(top, sc);
  resolve_kv_memory(sc);
  read_hardware(top, sc);
  if (auto r = top.table("slo")) {
    r->number("ttft_ms", sc.slo.ttft_ms, 0);
    r->number("tpot_ms", sc.slo.tpot_ms, 0);
    r->number("e2e_ms", sc.slo.e2e_ms, 0);
    r->finish();
  }
  top.at("variants"); // read by the caller
  top.at("sweep");
  top.finish();
  return sc;
}

// Dense peak throughput in the 16-bit type and memory bandwidth, from the
// makers' data sheets; cpu: what this project's 2-core CI machine reads
// and multiplies in F32 (config/sim/cpu_stories110m.toml), roughly.
const std::vector<std::pair<std::string, hardware_spec>>& presets() {
  static const std::vector<std::pair<std::string, hardware_spec>> all{
      {"h100", {3350, 989, 0}}, {"h200", {4800, 989, 0}}, {"a100", {2039, 312, 0}},
      {"l40s", {864, 362, 0}},  {"l4", {300, 121, 0}},    {"cpu", {40, 0.4, 100}},
  };
  return all;
}

auto format_value(const toml::node& n) -> std::string {
  if (n.is_string()) return n.as_string()->get();
  if (n.is_integer()) return std::to_string(n.as_integer()->get());
  if (n.is_floating_point()) return settings::show_number(n.as_floating_point()->get());
  if (n.is_boolean()) return n.as_boolean()->get() ? "true" : "false";
  return settings::type_name(n);
}

// A variant's overrides as (key path, value): `set = { "replicas.policy" =
// "static" }` and `set = { replicas.policy = "static" }` (nested tables) alike.
void flatten(const toml::table& t, const std::string& prefix, std::vector<std::pair<std::string, const toml::node*>>& out) {
  for (const auto& [k, v] : t) {
    const auto key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table()) flatten(*v.as_table(), key, out);
    else out.emplace_back(key, &v);
  }
}

} // namespace

auto hardware_preset_names() -> std::vector<std::string> {
  std::vector<std::string> out;
  for (const auto& [name, spec] : presets()) out.push_back(name);
  return out;
}

auto hardware_preset(const std::string& name) -> hardware_spec {
  for (const auto& [n, spec] : presets())
    if (n == name) return spec;
  throw scenario_error("unknown hardware preset \"" + name + "\"; known: " + joined(hardware_preset_names()));
}


auto parse_scenario(std::string_view text, const std::string& origin, const std::filesystem::path& dir,
                    const std::vector<scenario_override>& overrides) -> std::vector<scenario> {
  auto base = settings::parse(text, origin);
  for (const auto& [key, value] : overrides)
    settings::set_path(base, key, *settings::override_value(value).get("v"), "--set " + key);

  // The runs: variants (each a table of key paths to set) times sweep values.
  struct variant {
    std::string name;
    std::vector<std::pair<std::string, const toml::node*>> sets;
  };
  std::vector<variant> variants;
  if (const auto* v = base.get("variants")) {
    if (!v->is_array_of_tables() || v->as_array()->empty()) fail("variants", "expected one or more [[variants]] tables");
    std::size_t i = 0;
    for (const auto& e : *v->as_array()) {
      const auto where = "variants[" + std::to_string(i++) + "]";
      reader r(*e.as_table(), where);
      variant var;
      r.text("name", var.name);
      if (var.name.empty()) fail(where + ".name", "missing: every variant needs a name");
      if (r.table("set")) flatten(*e.as_table()->get("set")->as_table(), "", var.sets);
      r.finish();
      for (const auto& other : variants)
        if (other.name == var.name) fail(where + ".name", "\"" + var.name + "\" names two variants");
      variants.push_back(std::move(var));
    }
  }
  if (variants.empty()) variants.push_back({"base", {}});
  std::string sweep_key;
  std::vector<const toml::node*> sweep_values;
  if (const auto* s = base.get("sweep")) {
    if (!s->is_table()) fail("sweep", "expected a table with key and values");
    reader r(*s->as_table(), "sweep");
    r.text("key", sweep_key);
    const auto* values = r.at("values");
    r.finish();
    if (sweep_key.empty()) fail("sweep.key", "missing: the key path to sweep, like arrival.rate");
    if (values == nullptr || !values->is_array() || values->as_array()->empty())
      fail("sweep.values", "expected a non-empty array");
    for (const auto& v : *values->as_array()) sweep_values.push_back(&v);
  }
  if (sweep_values.empty()) sweep_values.push_back(nullptr);

  std::vector<scenario> runs;
  for (const auto& var : variants)
    for (const auto* sv : sweep_values) {
      toml::table t = base;
      for (const auto& [k, val] : var.sets) settings::set_path(t, k, *val, "variant " + var.name);
      std::string name = var.name;
      if (sv != nullptr) {
        settings::set_path(t, sweep_key, *sv, "sweep");
        name += " " + sweep_key + "=" + format_value(*sv);
      }
      runs.push_back(read_scenario(t, name, dir));
    }
  return runs;
}

auto load_scenario(const std::filesystem::path& file, const std::vector<scenario_override>& overrides)
    -> std::vector<scenario> {
  return parse_scenario(settings::read_file(file), file.string(), file.parent_path(), overrides);
}

} // namespace troupe::sim
