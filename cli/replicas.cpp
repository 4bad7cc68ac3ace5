#include "cli/replicas.hpp"

#include "cli/replica_factory.hpp"

#include "actors/executor_actor.hpp"
#include "actors/wire.hpp"
#include "engine/core/scheduler_config.hpp"
#include "engine/cuda/cuda_backend.hpp"
#include "engine/cpu/threads.hpp"
#include "actors/memory_manager_actor.hpp"
#include "engine/cpu/huge_pages.hpp"
#include "service/tools/harmony_parser.hpp"
#include "engine/model/gguf_model.hpp"
#include "engine/model/quantize_weights.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/tokenizer/output_processor.hpp"
#include "policies/registry.hpp"

#include <algorithm>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <stdexcept>

namespace troupe::cli {

auto served_name(const std::string& configured, const std::filesystem::path& dir) -> std::string {
  std::string name = configured;
  if (name.empty()) name = std::filesystem::absolute(dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::absolute(dir).lexically_normal().parent_path().filename().string();
  return name;
}

void check_model_dirs(const server_config& cfg, const std::string& command) {
  const auto missing = [](const std::string& dir) {
    std::error_code ec;
    return !std::filesystem::is_directory(dir, ec) && !gguf::is_gguf_file(dir);
  };
  const auto make = [](const std::string& dir) { return "troupe make-model --preset tiny --out " + dir; };
  if (missing(cfg.model.dir))
    throw std::runtime_error("no model directory or GGUF file '" + cfg.model.dir + "' (give one: troupe " + command +
                             " DIR|FILE.gguf; or make a tiny one: " + make(cfg.model.dir) + ")");
  for (std::size_t i = 0; i < cfg.model.more.size(); ++i)
    if (const auto& dir = cfg.model.more[i].dir; missing(dir))
      throw std::runtime_error("model.more[" + std::to_string(i) + "].dir: no model directory or GGUF file '" + dir +
                               "' (make a tiny one: " + make(dir) + ")");
}

namespace {

// The model's config and tokenizer, from its GGUF file or its directory.
void load_config_and_tokenizer(model_setup& m) {
  if (gguf::is_gguf_file(m.dir)) {
    m.gguf = gguf::file::open(m.dir);
    m.mc = gguf_model_config(*m.gguf);
    m.tok = std::make_shared<const tokenizer>(tokenizer::load_gguf(*m.gguf));
  } else {
    m.mc = model_config::load(m.dir);
    m.tok = std::make_shared<const tokenizer>(tokenizer::load_dir(m.dir));
  }
  const auto& mc = m.mc;
  // Fewer pieces than rows is usual (a padded vocabulary, never sampled);
  // more would name ids the model has no row for.
  if (m.tok->vocab_size() > mc.vocab_size)
    fail(tokenizer::file_in_dir(m.dir), std::to_string(m.tok->vocab_size()) + " tokens, more than the model's vocab_size " +
                                        std::to_string(mc.vocab_size));
}

// The KV cache's type: the CPU's is configurable; a CUDA device keeps
// its cache in engine.dtype, and quantized weights are the CPU's too.
auto resolve_kv_dtype(const server_config& cfg, const model_config& mc, bool cuda) -> kv_dtype {
  auto kv = cuda && cfg.engine.dtype == "bfloat16" ? kv_dtype::bf16 : kv_dtype::f32;
  if (cfg.scheduler.kv_cache_dtype != "auto") {
    if (cuda)
      throw std::runtime_error("scheduler.kv_cache_dtype \"" + cfg.scheduler.kv_cache_dtype +
                               "\": the CUDA backend keeps its KV cache in engine.dtype (leave it \"auto\")");
    kv = *parse_kv_dtype(cfg.scheduler.kv_cache_dtype);
  }
  if (cuda && cfg.engine.weight_dtype != "auto")
    throw std::runtime_error("engine.weight_dtype \"" + cfg.engine.weight_dtype +
                             "\": the CUDA backend does not implement quantized weights (use a cpu device)");
  if (!kv_dtype_fits(kv, mc.head_dim))
    throw std::runtime_error("scheduler.kv_cache_dtype \"q8_0\" stores blocks of 32 values; this model's head_dim " +
                             std::to_string(mc.head_dim) + " is not a multiple of 32");
  return kv;
}

// The zero and CPU executors' options, sharing one grammar cache.
void set_executor_options(const server_config& cfg, model_setup& m) {
  m.zero.block_size = cfg.scheduler.block_size;
  m.zero.num_kv_blocks = m.num_blocks;
  m.zero.vocab_size = m.mc.vocab_size;
  m.zero.num_sampled_ids = m.tok->vocab_size();
  m.zero.avoid = m.eos;
  for (token_id t = 0; t < m.tok->vocab_size(); ++t)
    if (m.tok->is_control(t) || m.tok->is_unknown(t)) m.zero.avoid.push_back(t);
  m.zero.step_time = std::chrono::microseconds(cfg.engine.zero_step_us);
  m.cpu.block_size = cfg.scheduler.block_size;
  m.cpu.num_kv_blocks = m.num_blocks;
  m.cpu.num_threads = cfg.engine.threads;
  m.cpu.num_sampled_ids = m.tok->vocab_size();
  m.cpu.jump_forward = cfg.engine.jump_forward;
  m.cpu.kv_type = m.kv;
  // Harmony's markers (gpt-oss's tokenizer) are control tokens its forced
  // tool calls and structured answers are written with; not its end tokens
  // (<|call|>, <|return|>), which the grammar allows only where it may end.
  std::vector<token_id> markers;
  if (m.tok->id_of("<|channel|>") >= 0)
    for (const auto marker : tools::harmony_parser::markers)
      if (const auto id = m.tok->id_of(marker); id >= 0 && std::find(m.eos.begin(), m.eos.end(), id) == m.eos.end())
        markers.push_back(id);
  m.cpu.grammars = std::make_shared<grammar::grammar_cache>(std::make_shared<const grammar::token_vocabulary>(
      grammar::token_vocabulary::of(*m.tok, m.eos, m.tok->vocab_size(), markers)));
  m.zero.grammars = m.cpu.grammars;
}

// A replica's scheduler options on a device of its own.
void set_replica_options(const server_config& cfg, model_setup& m) {
  const auto& mc = m.mc;
  auto& ro = m.replica;
  ro.limits = limits_of(cfg.scheduler, m.max_model_len);
  // Swap space is the local devices' (cli/serve.cpp sets it); an autoscaled
  // or remote replica recomputes.
  ro.limits.preemption = preemption_mode::recompute;
  ro.kv = kv_options_of(cfg.scheduler);
  // Where every layer slides (Mistral, Phi-3) a request's blocks that leave
  // the window are released as it goes; a global layer needs them all.
  bool all_slide = mc.sliding_window > 0 && mc.sliding_window < m.max_model_len;
  for (std::int64_t l = 0; all_slide && l < mc.num_hidden_layers; ++l) all_slide = mc.is_sliding(l);
  if (all_slide) ro.kv.sliding_window_tokens = static_cast<std::int32_t>(mc.sliding_window);
  ro.scheduling = cfg.scheduler.policy;
  ro.share = m.num_blocks;
  ro.eos_ids = m.eos;
}

} // namespace

auto prepare_model(const server_config& cfg, bool cuda) -> model_setup {
  model_setup m;
  m.dir = cfg.model.dir;
  m.name = served_name(cfg.model.served_model_name, m.dir);
  load_config_and_tokenizer(m);
  const auto& mc = m.mc;
  m.eos = eos_token_ids(m.mc, *m.tok);
  const auto kv = resolve_kv_dtype(cfg, mc, cuda);
  m.kv = kv;
  m.block_bytes = kv_block_bytes(kv, mc.num_hidden_layers, mc.num_key_value_heads, mc.head_dim, cfg.scheduler.block_size);
  m.num_blocks = static_cast<std::int32_t>(std::min<std::int64_t>(cfg.scheduler.kv_memory_bytes / m.block_bytes, 1 << 30));
  if (m.num_blocks < 1)
    throw std::runtime_error("scheduler.kv_memory: " + std::to_string(cfg.scheduler.kv_memory_bytes) +
                             " bytes hold no KV block of " + std::to_string(m.block_bytes) + " bytes");
  // Policies named by path are loaded here, so a bad one stops start-up with
  // its reason (each replica then makes its own instance).
  (void)policy::make_scheduling_policy(cfg.scheduler.policy);
  (void)policy::make_eviction_policy(cfg.scheduler.eviction);
  m.max_model_len = cfg.scheduler.max_model_len > 0 ? cfg.scheduler.max_model_len : static_cast<std::int32_t>(mc.max_position_embeddings);

  set_executor_options(cfg, m);
  set_replica_options(cfg, m);
  if (cfg.scheduler.watermark_blocks >= m.num_blocks)
    throw std::runtime_error("scheduler.watermark_blocks: " + std::to_string(cfg.scheduler.watermark_blocks) +
                             " leaves no block of a replica's " + std::to_string(m.num_blocks) + " for admissions");
  return m;
}

auto plan_fleet(const server_config& cfg, const model_setup& m) -> fleet_plan {
  fleet_plan p;
  p.cuda = parse_device(cfg.engine.devices.front()).has_value();
  p.devices = p.cuda ? 1 : static_cast<std::int32_t>(cfg.engine.devices.size());
  p.replicas = cfg.engine.replicas * p.devices;
  // Swap space, per device: each of its replicas gets an equal share of the host blocks.
  if (cfg.scheduler.preemption_mode == "swap") {
    p.num_host_blocks = static_cast<std::int32_t>(std::min<std::int64_t>(cfg.scheduler.swap_space_bytes / m.block_bytes, 1 << 30));
    if (p.num_host_blocks < cfg.engine.replicas)
      throw std::runtime_error("scheduler.swap_space: " + std::to_string(cfg.scheduler.swap_space_bytes) +
                               " bytes hold " + std::to_string(p.num_host_blocks) + " KV blocks of " +
                               std::to_string(m.block_bytes) + " bytes, fewer than one per replica");
  }
  p.share = m.num_blocks / cfg.engine.replicas;
  if (cfg.scheduler.watermark_blocks >= p.share)
    throw std::runtime_error("scheduler.watermark_blocks: " + std::to_string(cfg.scheduler.watermark_blocks) +
                             " leaves no block of a replica's " + std::to_string(p.share) + " for admissions");
  p.autoscaled = cfg.autoscaler.enabled();
  if (p.autoscaled && (p.replicas < cfg.autoscaler.min_replicas || p.replicas > cfg.autoscaler.max_replicas))
    throw std::runtime_error("engine.replicas: the " + std::to_string(p.replicas) +
                             " replica(s) to start with are outside the autoscaler's [" +
                             std::to_string(cfg.autoscaler.min_replicas) + ", " +
                             std::to_string(cfg.autoscaler.max_replicas) + "]");
  return p;
}

auto prepare_for_devices(const server_config& cfg) -> model_setup {
  const auto cuda_device = parse_device(cfg.engine.devices.front());
  const bool cuda_executor = cuda_device.has_value() && cfg.engine.executor != "zero";
  if (cuda_executor && static_cast<std::int32_t>(cfg.engine.devices.size()) != cfg.engine.tensor_parallel_size)
    throw std::runtime_error("engine.devices: " + std::to_string(cfg.engine.devices.size()) +
                             " CUDA devices, but engine.tensor_parallel_size is " +
                             std::to_string(cfg.engine.tensor_parallel_size) +
                             " (the devices of one tensor-parallel executor)");
  auto setup = prepare_model(cfg, cuda_device.has_value());
  if (cuda_executor)
    if (const auto why = cuda_supports(setup.mc); !why.empty()) throw std::runtime_error(why);
  return setup;
}

auto load_model_weights(const model_setup& m) -> model_weights {
  return m.gguf ? load_gguf_weights(m.gguf, m.mc) : model_weights::load(m.dir);
}

auto load_cpu_weights(const server_config& cfg, const model_setup& m) -> model_weights {
  auto w = load_model_weights(m);
  if (cfg.engine.weight_dtype == "q8_0") quantize_weights(w, gguf::tensor_type::q8_0);
  if (cfg.engine.weight_dtype == "q4_k") quantize_weights(w, gguf::tensor_type::q4_k);
  if (cfg.engine.huge_pages) place_in_huge_pages(w);
  return w;
}

auto first_lease(caf::actor_system& sys, const memory_manager_actor& mm, std::int32_t share) -> std::vector<block_id> {
  std::vector<block_id> lease;
  caf::scoped_actor self{sys};
  self->request(mm, caf::infinite, lease_atom_v, std::max(1, share / 2))
      .receive([&](std::vector<block_id>& b) { lease = std::move(b); },
               [&](caf::error& e) { throw std::runtime_error("KV lease failed: " + sys.render(e)); });
  return lease;
}

auto start_own_replica(caf::actor_system& sys, const server_config& cfg, const model_setup& m, std::int32_t index,
                       router_actor router, server_metrics* metrics, server_status* status,
                       const std::string& device) -> started_replica {
  started_replica out;
  out.index = index;
  auto exec = spawn_executor(sys, make_executors(cfg, m, 1, 0).front());
  auto mm = spawn_memory_manager(sys, m.num_blocks, cfg.scheduler.eviction, metrics, device);
  out.actors = {caf::actor_cast<caf::actor>(exec), caf::actor_cast<caf::actor>(mm)};
  auto options = m.replica;
  options.replica = index;
  options.router = std::move(router);
  try {
    out.scheduler = caf::actor_cast<caf::actor>(start_replica(sys, cfg, options, exec, mm, metrics, status));
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  out.actors.push_back(out.scheduler);
  return out;
}

auto block_stop_signals() -> sigset_t {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void configure_actors(caf::actor_system_config& caf_cfg, const server_config& cfg, bool network) {
  caf_cfg.set("scheduler.max-threads", static_cast<std::size_t>(resolve_threads(cfg.actors.caf_threads)));
  add_wire_types(caf_cfg);
  if (!network) return;
  // CAF's network layer (BASP) on loopback only: the gate in front of it
  // (actors/worker_gate.hpp) does TCP, mutual TLS and the fleet's secret,
  // so CAF's OpenSSL module is not loaded on either side.
  caf_cfg.load<caf::io::middleman>();
  // A peer that stops answering (a frozen process, a partition that leaves
  // the TCP connection open) is dropped after a few missed heartbeats: its
  // replicas go down as if it died (and a worker then rejoins).
  caf_cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(500)});
  caf_cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(3)});
}

} // namespace troupe::cli
