// troupe serve: the OpenAI-compatible server over the actor system.

#include "actors/autoscaler_actor.hpp"
#include "actors/executor_actor.hpp"
#include "actors/gateway.hpp"
#include "service/http/openai/openai_format.hpp"
#include "actors/memory_manager_actor.hpp"
#include "actors/router_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "service/server_config.hpp"
#include "actors/tokenizer_actor.hpp"
#include "service/tools/reasoning_parser.hpp"
#include "service/tools/tool_grammar.hpp"
#include "actors/wire.hpp"
#include "actors/worker_gate.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/config_source.hpp"
#include "cli/replica_factory.hpp"
#include "cli/replicas.hpp"
#include "cli/serve_checks.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/cuda/cuda_backend.hpp"
#include "engine/cpu/huge_pages.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/model/model_config.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/tokenizer/output_processor.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/zero_executor.hpp"
#include "policies/registry.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace troupe::cli {
namespace {

// A tag that changes when the model's files do: FNV-1a over config.json and
// the first 64 KiB of each weights file (the safetensors header); a GGUF
// file's first and last MiB and its size.
auto model_version(const std::filesystem::path& dir, const std::string& name) -> std::string {
  std::uint64_t h = 1469598103934665603ull;
  // Up to `limit` bytes of p from byte `from`.
  const auto mix = [&h](const std::filesystem::path& p, std::size_t limit, std::uintmax_t from = 0) {
    std::ifstream in(p, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(from));
    char buf[4096];
    std::size_t done = 0;
    while (done < limit && in.read(buf, sizeof buf).gcount() > 0) {
      for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
      done += static_cast<std::size_t>(in.gcount());
    }
  };
  if (gguf::is_gguf_file(dir)) {
    // Its metadata and (some of) its tensor table, then its size and last
    // MiB: two files that differ only in weights differ there.
    mix(dir, 1 << 20);
    std::error_code ec;
    const auto size = std::filesystem::file_size(dir, ec);
    h = (h ^ size) * 1099511628211ull;
    mix(dir, 1 << 20, size > (1u << 20) ? size - (1u << 20) : 0);
  } else {
    mix(dir / "config.json", 1 << 20);
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") mix(e.path(), 1 << 16);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return name + "@" + std::string(hex, 12);
}

// Everything of one model that exists only once it is loaded.
struct engine_parts {
  std::shared_ptr<serving_context> ctx;
  std::unique_ptr<server_metrics> metrics; // recorded into by the actors
  std::vector<caf::actor> actors; // to stop at shutdown
};

// The model's profile (service/request/model_profile): its limits, parsers
// and what its backend can do.
auto profile_of(const model_plan& model) -> model_profile {
  const auto& cfg = model.cfg;
  const auto& setup = model.setup;
  profile_settings s;
  s.name = setup.name;
  s.version = cfg.model.version.empty() ? model_version(setup.dir, setup.name) : cfg.model.version;
  s.max_model_len = setup.max_model_len;
  s.eos_ids = setup.eos;
  s.defaults = default_sampling_params(setup.mc);
  s.default_max_tokens = setup.mc.default_max_tokens;
  s.block_size = cfg.scheduler.block_size;
  s.max_retries = cfg.router.max_retries;
  // CUDA's backend computes no prompt logprobs and applies no grammar (the zero executor does both).
  s.prompt_logprobs = !parse_device(cfg.engine.devices.front()) || cfg.engine.executor == "zero";
  s.grammars = s.prompt_logprobs;
  s.tool_parser = cfg.model.tool_parser;
  s.reasoning_parser = cfg.model.reasoning_parser;
  if (model.chat) s.chat_template = model.chat->text;
  return make_profile(setup.tok, s);
}

// The devices' names, distinct for the metrics and the log ("cpu:0",
// "cpu:1"... when several), then the autoscaler's ("scaled:N", each on a
// device of its own): their series are made up front.
auto device_names(const server_config& cfg, int num_devices, int autoscaled_slots) -> std::vector<std::string> {
  std::vector<std::string> names;
  for (int d = 0; d < num_devices; ++d)
    names.push_back(num_devices > 1 ? cfg.engine.devices[static_cast<std::size_t>(d)] + ":" + std::to_string(d)
                                    : cfg.engine.devices.front());
  for (int r = 0; r < autoscaled_slots; ++r) names.push_back("scaled:" + std::to_string(r));
  return names;
}

auto start_router(caf::actor_system& sys, const model_plan& model, const serving_context& ctx, server_metrics* metrics,
                  int slots) -> router_actor {
  const auto& cfg = model.cfg;
  router_options rto;
  rto.policy = cfg.router.policy;
  rto.weights = cfg.router.weights;
  rto.health = {cfg.router.unhealthy_after, cfg.router.healthy_after};
  rto.check_interval_s = cfg.router.health_check_interval_s;
  rto.check_timeout_s = cfg.router.health_check_timeout_s;
  rto.check_prompt = model.setup.tok->encode("ping", true);
  if (rto.check_prompt.empty()) rto.check_prompt.push_back(0);
  rto.metrics = metrics;
  rto.num_ready = ctx.num_ready;
  rto.slots = static_cast<std::size_t>(slots);
  rto.block_size = cfg.scheduler.block_size;
  return spawn_router(sys, std::move(rto));
}

// Per device, its executor and memory manager; its replicas (each from the
// replica factory) lease an equal share of its blocks and join the router.
void start_devices(caf::actor_system& sys, const model_plan& model, server_status& status, engine_parts& parts,
                   const std::vector<std::string>& names) {
  const auto& cfg = model.cfg;
  const auto& plan = model.plan;
  auto& ctx = *parts.ctx;
  const auto executors = make_executors(cfg, model.setup, plan.devices, plan.num_host_blocks);
  auto ro = model.setup.replica;
  ro.limits.preemption = cfg.scheduler.preemption_mode == "swap" ? preemption_mode::swap : preemption_mode::recompute;
  ro.limits.num_host_blocks = plan.num_host_blocks / cfg.engine.replicas;
  ro.share = plan.share;
  ro.router = ctx.router;
  // Prefix-affine routing: the router probes each device's cache for each dispatch.
  const bool probed = policy::make_routing_policy(cfg.router.policy)->reads_cached_blocks() &&
                      cfg.scheduler.enable_prefix_caching;
  for (int d = 0; d < plan.devices; ++d) {
    auto exec = spawn_executor(sys, executors[static_cast<std::size_t>(d)]);
    auto mm = spawn_memory_manager(sys, model.setup.num_blocks, cfg.scheduler.eviction, parts.metrics.get(),
                                   names[static_cast<std::size_t>(d)]);
    parts.actors.push_back(caf::actor_cast<caf::actor>(exec));
    parts.actors.push_back(caf::actor_cast<caf::actor>(mm));
    for (int k = 0; k < cfg.engine.replicas; ++k) {
      const int r = d * cfg.engine.replicas + k;
      ro.replica = r;
      ro.limits.first_host_block = k * ro.limits.num_host_blocks;
      auto scheduler = start_replica(sys, cfg, ro, exec, mm, parts.metrics.get(), &status);
      parts.actors.push_back(caf::actor_cast<caf::actor>(scheduler));
      caf::anon_send(ctx.router, join_atom_v, static_cast<std::int32_t>(r), scheduler, false, false);
      if (probed) caf::anon_send(ctx.router, device_atom_v, static_cast<std::int32_t>(r), mm);
    }
  }
}

void start_autoscaler(caf::actor_system& sys, const model_plan& model, server_status& status, engine_parts& parts,
                      int slots) {
  const auto& cfg = model.cfg;
  auto& ctx = *parts.ctx;
  // A cold start (the replica factory): the weights loaded again, its own
  // executor, KV cache (kv_memory), memory manager and scheduler; it joins
  // the router once the autoscaler has it back.
  auto start = [&sys, cfg, setup = model.setup, router = ctx.router, metrics = parts.metrics.get(),
                status = &status](std::int32_t index) {
    return start_own_replica(sys, cfg, setup, index, router, metrics, status, "scaled:" + std::to_string(index));
  };
  autoscaler_options ao;
  ao.policy = cfg.autoscaler.policy;
  ao.target = cfg.autoscaler.target;
  ao.fleet = {cfg.autoscaler.min_replicas, cfg.autoscaler.max_replicas, cfg.autoscaler.scale_in_delay_s,
              cfg.autoscaler.warm_pool,    model.plan.replicas,         static_cast<std::size_t>(slots)};
  ao.interval_s = cfg.autoscaler.interval_s;
  ao.start = std::move(start);
  ao.metrics = parts.metrics.get();
  ao.router = ctx.router;
  ctx.autoscaler = spawn_autoscaler(sys, std::move(ao));
  parts.actors.push_back(caf::actor_cast<caf::actor>(ctx.autoscaler));
}

// The line the server prints for a model it serves.
auto engine_info(const model_plan& model) -> std::string {
  const auto& cfg = model.cfg;
  const auto& plan = model.plan;
  std::ostringstream info;
  info << "model " << model.setup.name;
  if (!cfg.model.version.empty()) info << " version " << cfg.model.version;
  info << " (" << cfg.engine.executor << " executor), " << model.setup.num_blocks << " KV blocks of "
       << cfg.scheduler.block_size << " tokens, ";
  if (plan.devices > 1) info << "per device on " << plan.devices << " devices, ";
  if (cfg.scheduler.preemption_mode == "swap") info << plan.num_host_blocks << " in host swap space, ";
  info << plan.replicas << " replica" << (plan.replicas == 1 ? "" : "s") << " (routing: " << cfg.router.policy;
  if (plan.autoscaled)
    info << "; autoscaler: " << cfg.autoscaler.policy << ", " << cfg.autoscaler.min_replicas << " to "
         << cfg.autoscaler.max_replicas << ", warm pool " << cfg.autoscaler.warm_pool;
  info << "), context " << model.setup.max_model_len;
  return info.str();
}

// Loads one model, checked (check_serve_config: its [model], [engine],
// [scheduler], [router]), with its replicas, executors, memory managers and
// router; its metrics go to `registry`.
auto start_engine(caf::actor_system& sys, const model_plan& model, server_status& status, engine_parts& parts,
                  std::shared_ptr<prometheus::Registry> registry) -> std::string {
  const auto& cfg = model.cfg;
  const auto& setup = model.setup;
  const auto& plan = model.plan;
  // (Draining ones are on top of max_replicas and the pool: twice the maximum.)
  const int slots = plan.autoscaled ? fleet_slots(plan.replicas, cfg.autoscaler.max_replicas, cfg.autoscaler.warm_pool)
                                    : plan.replicas;
  const auto names = device_names(cfg, plan.devices, plan.autoscaled ? slots : 0);
  parts.metrics = std::make_unique<server_metrics>(std::move(registry), setup.name, cfg.model.version, slots, names);
  parts.metrics->kv_cache_shape(kv_dtype_name(setup.kv), setup.block_bytes,
                                static_cast<std::int64_t>(setup.num_blocks) * cfg.scheduler.block_size * plan.devices);
  auto ctx = std::make_shared<serving_context>();
  static_cast<model_profile&>(*ctx) = profile_of(model);
  ctx->metrics = parts.metrics.get();
  for (int i = 0; i < resolve_threads(cfg.actors.tokenizers); ++i) {
    ctx->tokenizers.push_back(
        spawn_tokenizer(sys, setup.tok, model.chat, ctx->support.grammars ? setup.cpu.grammars : nullptr));
    parts.actors.push_back(caf::actor_cast<caf::actor>(ctx->tokenizers.back()));
  }
  ctx->router = start_router(sys, model, *ctx, parts.metrics.get(), slots);
  parts.actors.push_back(caf::actor_cast<caf::actor>(ctx->router));
  parts.ctx = ctx;
  start_devices(sys, model, status, parts, names);
  if (plan.autoscaled) start_autoscaler(sys, model, status, parts, slots);
  // Ready only once the router has every replica in rotation: its answer
  // comes after the joins sent above (one mailbox, enqueued in order).
  caf::scoped_actor self{sys};
  self->request(ctx->router, caf::infinite, fleet_atom_v).receive([](fleet_snapshot&) {}, [](caf::error&) {});
  return engine_info(model);
}

// Every model, checked: [model] first, then model.more (a name served
// already is its canary version), and cfg's capability routes over them.
auto start_fleet(caf::actor_system& sys, const server_config& cfg, const serve_plan& plan, server_status& status,
                 std::vector<std::unique_ptr<engine_parts>>& parts, std::vector<std::string>& info)
    -> std::shared_ptr<fleet> {
  auto out = std::make_shared<fleet>();
  auto registry = std::make_shared<prometheus::Registry>();
  out->models.reserve(plan.models.size());
  for (const auto& m : plan.models) {
    parts.push_back(std::make_unique<engine_parts>());
    info.push_back(start_engine(sys, m, status, *parts.back(), registry));
    const auto& ctx = parts.back()->ctx;
    if (m.canary_percent == 0) {
      out->models.push_back({m.name, ctx, nullptr, 0});
      continue;
    }
    for (auto& s : out->models)
      if (s.name == m.name) {
        s.canary = ctx;
        s.canary_percent = m.canary_percent;
      }
  }
  for (const auto& r : cfg.router.capability_rules)
    out->routes.push_back({{r.max_prompt_tokens, r.max_tokens, r.tiers}, r.model, out->find(r.small), out->find(r.large)});
  return out;
}

auto gateway_options_of(const server_config& cfg) -> gateway_options {
  gateway_options go;
  go.stall_timeout =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(cfg.server.stall_timeout_s));
  go.admin_api = cfg.server.admin_api;
  go.tenants_file = cfg.server.tenants_file;
  go.response_cache_bytes = static_cast<std::size_t>(cfg.server.response_cache_bytes);
  go.response_cache_ttl_s = cfg.server.response_cache_ttl_s;
  go.responses_store_bytes = static_cast<std::size_t>(cfg.server.responses_store_bytes);
  go.refuse_unknown_fields = cfg.server.unknown_fields == "refuse";
  go.seal = std::make_shared<const api::reasoning_seal>(cfg.server.reasoning_key_file.empty()
                                                            ? api::reasoning_seal()
                                                            : api::reasoning_seal::from_file(cfg.server.reasoning_key_file));
  go.responses_ttl_s = cfg.server.responses_ttl_s;
  go.websocket_max_buffered = static_cast<std::size_t>(cfg.server.websocket_max_buffered_bytes);
  go.metrics_elsewhere = cfg.server.metrics_port >= 0;
  return go;
}

auto http_options_of(const server_config& cfg) -> http::server_options {
  http::server_options so;
  so.host = cfg.server.host;
  so.port = cfg.server.port;
  so.threads = cfg.server.http_threads;
  so.max_body_bytes = cfg.server.max_body_bytes;
  so.idle_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.server.idle_timeout_s * 1000));
  so.websocket_idle_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.server.websocket_idle_timeout_s * 1000));
  so.error_body = [](int status, const std::string& message) {
    api::api_error e;
    e.status = status;
    e.message = message;
    e.code = status == 413   ? "request_too_large"
             : status == 415 ? "unsupported_content_encoding"
             : status == 431 ? "request_header_fields_too_large"
                             : "bad_request";
    return api::error_body(e);
  };
  return so;
}

// router.worker_port: workers join at the door (their replicas then serve
// like local ones), behind the gate.
void open_worker_gate(caf::actor_system& sys, const server_config& cfg, const std::shared_ptr<fleet>& served,
                  std::string& worker_secret_of_plan, engine_parts& first, std::optional<worker_gate>& gate) {
  const auto worker_secret = worker_secret_of_plan;
  auto door = spawn_door(sys, served, std::move(worker_secret_of_plan));
  first.actors.push_back(caf::actor_cast<caf::actor>(door));
  // CAF's BASP listens on loopback only; the gate in front of it owns
  // router.worker_port (TLS, the fleet's secret, then a relay that bounds
  // every frame), so no stranger's byte reaches CAF's multiplexer.
  auto basp = sys.middleman().publish(door, 0, "127.0.0.1", true);
  if (!basp)
    throw std::runtime_error("router.worker_port: cannot publish the door on 127.0.0.1: " +
                             sys.render(basp.error()));
  try {
    gate.emplace(cfg.server.host, static_cast<std::uint16_t>(cfg.router.worker_port), *basp, worker_secret,
                 gate_tls{cfg.router.worker_tls_cert, cfg.router.worker_tls_key, cfg.router.worker_tls_ca});
  } catch (const std::runtime_error& e) {
    const std::string why = e.what(); // (a TLS file's error names its key)
    throw std::runtime_error(why.starts_with("router.") ? why : "router.worker_port: " + why);
  }
  std::printf("troupe: workers join at %s:%u\n", cfg.server.host.c_str(), static_cast<unsigned>(gate->port()));
}

// server.metrics_port: /metrics (its series name tenants) on an internal
// address; the same server, a listener of its own, one thread.
void open_metrics_listener(const server_config& cfg, const http::server_options& so, gateway& gw,
                           std::optional<http::server>& metrics_srv) {
  if (cfg.server.metrics_port < 0) return;
  auto mo = so;
  mo.host = cfg.server.metrics_host.empty() ? cfg.server.host : cfg.server.metrics_host;
  mo.port = static_cast<std::uint16_t>(cfg.server.metrics_port);
  mo.threads = 1;
  try {
    metrics_srv.emplace(mo, [&gw](http::request r, std::shared_ptr<http::exchange> c) {
      gw.handle(std::move(r), std::move(c), listener::metrics);
    });
  } catch (const std::runtime_error& e) {
    throw config_error(std::string(cfg.server.metrics_host.empty() ? "server.metrics_port" : "server.metrics_host") + ": " +
                       e.what());
  }
}

// Drain: readiness turns 503 and new requests get 503 (the listener stays
// open so that probes see it); the ones in flight get drain_timeout_s, then
// are cut off. Returns how many were still live at the timeout.
template <class Stop>
auto drain(const server_config& cfg, server_status& status, int sig, const Stop& stop_actors) -> std::int64_t {
  status.draining = true;
  std::printf("troupe: %s: draining %lld request(s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
              static_cast<long long>(status.num_live_requests.load()));
  std::fflush(stdout);
  const auto wait_for_requests = [&](std::chrono::steady_clock::time_point until) {
    while (status.num_live_requests.load() > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  wait_for_requests(std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(cfg.server.drain_timeout_s)));
  const auto left = status.num_live_requests.load();
  // Requests still live are cut off: their sinks tell the clients why while
  // the HTTP threads still run to send it (a second at most), then they stop.
  status.stopping = true;
  stop_actors();
  wait_for_requests(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  return left;
}

} // namespace

// Where it listens (both listeners listen before either is announced).
void announce(const server_config& cfg, const http::server& srv, const std::optional<http::server>& metrics_srv) {
  std::printf("troupe: listening on http://%s:%u\n", cfg.server.host.c_str(), static_cast<unsigned>(srv.port()));
  if (metrics_srv)
    std::printf("troupe: metrics at http://%s:%u/metrics\n",
                (cfg.server.metrics_host.empty() ? cfg.server.host : cfg.server.metrics_host).c_str(),
                static_cast<unsigned>(metrics_srv->port()));
  std::fflush(stdout);
}

auto run_serve(std::span<char* const> argv) -> int {
  const args a(argv, config_options(serve_key_options()), {}, 1);
  const auto cfg = config_source_of(a, serve_key_options()).load();
  check_model_dirs(cfg, "serve");

  // SIGTERM and SIGINT are taken by sigwait below: blocked here, before any
  // thread starts, so that every thread inherits the mask.
  auto signals = block_stop_signals();
  sigaddset(&signals, SIGHUP); // reloads the tenants file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Every refusal of the configuration comes here, before any port opens
  // (the weights load once the server listens: readiness is 503 meanwhile).
  auto plan = check_serve_config(cfg);

  caf::actor_system_config caf_cfg;
  configure_actors(caf_cfg, cfg, cfg.router.worker_port >= 0);
  caf::actor_system sys{caf_cfg};
  server_status status;
  gateway gw(sys, status, gateway_options_of(cfg));
  gw.watch_tenants(std::chrono::milliseconds(static_cast<std::int64_t>(cfg.server.tenants_poll_s * 1000)));
  const auto so = http_options_of(cfg);
  http::server srv(so, [&gw](http::request r, std::shared_ptr<http::exchange> c) { gw.handle(std::move(r), std::move(c)); });
  // Both listeners listen before either is announced.
  std::optional<http::server> metrics_srv;
  open_metrics_listener(cfg, so, gw, metrics_srv);
  announce(cfg, srv, metrics_srv);

  std::vector<std::unique_ptr<engine_parts>> parts;
  // router.worker_port's gate. Gone before the actor system: each worker's
  // link closes, and the workers rejoin once a router node listens again.
  std::optional<worker_gate> gate;
  const auto stop_actors = [&] {
    for (auto& p : parts)
      for (auto& h : p->actors) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    gw.set_fleet(nullptr);
    for (auto& p : parts) {
      p->ctx.reset();
      p->actors.clear();
    }
  };
  try {
    std::vector<std::string> info;
    auto served = start_fleet(sys, cfg, plan, status, parts, info);
    plan.models.clear(); // (what the engines keep of it, they hold)
    if (cfg.router.worker_port >= 0) open_worker_gate(sys, cfg, served, plan.worker_secret, *parts.front(), gate);
    gw.set_fleet(std::move(served));
    status.last_progress_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    status.ready = true;
    for (const auto& line : info) std::printf("troupe: ready: %s\n", line.c_str());
    std::fflush(stdout);
  } catch (...) {
    srv.stop();
    if (metrics_srv) metrics_srv->stop();
    stop_actors();
    sys.await_all_actors_done();
    throw;
  }

  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) gw.reload_tenants("SIGHUP");
  const auto left = drain(cfg, status, sig, stop_actors);
  srv.stop();
  if (metrics_srv) metrics_srv->stop();
  sys.await_all_actors_done();
  std::printf("troupe: stopped%s\n", left > 0 ? " (drain timeout: requests cut off)" : "");
  return 0;
}

} // namespace troupe::cli
