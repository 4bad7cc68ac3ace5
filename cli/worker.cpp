// troupe worker --join HOST:PORT: replicas of a model on this machine that
// serve a router node's traffic (its router.worker_port) through CAF's
// network layer. The model and the engine come from the same settings as
// `troupe serve` ([model], [engine], [scheduler]: the defaults, --config
// FILE, --set); each of engine.replicas replicas gets a device of its own.

#include "actors/wire.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/config_source.hpp"
#include "cli/replicas.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/cuda_backend.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/openssl/remote_actor.hpp>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>

namespace troupe::cli {

auto run_worker(std::span<char* const> argv) -> int {
  auto options = config_options({});
  options.insert("join");
  const args a(argv, options, {}, 1);
  const auto join = a.required("join");
  const auto colon = join.rfind(':');
  std::int64_t port = -1;
  try {
    if (colon != std::string::npos) port = std::stoll(join.substr(colon + 1));
  } catch (...) {
  }
  if (colon == std::string::npos || colon == 0 || port < 1 || port > 65535)
    throw usage_error("--join wants HOST:PORT (the router node's router.worker_port), got '" + join + "'");
  const auto host = join.substr(0, colon);
  const auto cfg = config_source_of(a, {}).load();
  check_model_dirs(cfg, "worker");
  const auto secret = read_worker_secret(cfg); // before connecting: no credentials, no join
  if (cfg.engine.executor != "zero" && parse_device(cfg.engine.devices.front()))
    throw std::runtime_error("engine.devices: a worker's replicas run on the CPU (or the zero executor)");

  auto signals = block_stop_signals();

  caf::actor_system_config caf_cfg;
  configure_actors(caf_cfg, cfg, true);
  // What the actors use outlives them: declared before the system, which
  // waits for its actors as it goes.
  server_status status;
  std::optional<server_metrics> metrics;
  caf::actor_system sys{caf_cfg};
  std::vector<caf::actor> actors; // the replicas' and their endpoints
  const auto stop_all = [&] {
    for (auto& h : actors) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    actors.clear();
  };
  bool router_gone = false;
  try {
    auto door = cfg.router.worker_tls_cert.empty()
                    ? sys.middleman().remote_actor<door_actor>(host, static_cast<std::uint16_t>(port))
                    : caf::openssl::remote_actor<door_actor>(sys, host, static_cast<std::uint16_t>(port));
    if (!door) {
      auto why = sys.render(door.error());
      if (!cfg.router.worker_tls_cert.empty() && why.find("handshake") != std::string::npos)
        why += " (the TLS handshake failed: each side's certificate must be signed by the other's router.worker_tls_ca)";
      throw std::runtime_error("cannot reach " + join + ": " + why);
    }
    const auto setup = prepare_model(cfg);

    // The replica indices (and the router) first: the metrics need the count.
    // Each join answers a fresh challenge with the fleet's secret.
    caf::scoped_actor self{sys};
    std::vector<std::int32_t> indices;
    std::vector<std::string> tickets;
    router_actor router;
    for (int k = 0; k < cfg.engine.replicas; ++k) {
      std::string challenge;
      self->request(*door, std::chrono::seconds(30), hello_atom_v)
          .receive([&](std::string& c) { challenge = std::move(c); },
                   [&](caf::error& e) { throw std::runtime_error(join + " did not answer: " + sys.render(e)); });
      self->request(*door, std::chrono::seconds(30), join_atom_v, setup.name, challenge,
                    worker_proof(secret, challenge))
          .receive(
              [&](std::int32_t index, router_actor& r, std::string& ticket) {
                indices.push_back(index);
                tickets.push_back(std::move(ticket));
                router = std::move(r);
              },
              [&](caf::error& e) {
                // The door's reason when it gave one, else CAF's rendering.
                const auto& why = e.context();
                throw std::runtime_error(join + " refused the worker: " +
                                         (why.match_elements<std::string>() ? why.get_as<std::string>(0)
                                                                            : sys.render(e)));
              });
    }
    std::vector<std::string> devices;
    for (const auto i : indices) devices.push_back("worker:" + std::to_string(i));
    metrics.emplace(nullptr, setup.name, "", *std::max_element(indices.begin(), indices.end()) + 1, devices);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      auto r = start_own_replica(sys, cfg, setup, indices[k], router, &*metrics, &status, devices[k]);
      actors.insert(actors.end(), r.actors.begin(), r.actors.end());
      if (!r.error.empty()) throw std::runtime_error(r.error);
      auto endpoint = spawn_endpoint(sys, caf::actor_cast<scheduler_actor>(r.scheduler));
      actors.push_back(caf::actor_cast<caf::actor>(endpoint));
      self->send(*door, join_atom_v, indices[k], setup.name, endpoint, tickets[k]);
    }
    std::string list;
    for (const auto i : indices) list += (list.empty() ? "" : ", ") + std::to_string(i);
    std::printf("troupe worker: joined %s: replica%s %s of %s\n", join.c_str(), indices.size() == 1 ? "" : "s",
                list.c_str(), setup.name.c_str());
    std::fflush(stdout);

    // Until a signal, or the connection to the router node closes (it
    // stopped, or dropped this worker after missed heartbeats).
    self->monitor(*door);
    while (!router_gone) {
      const timespec tick{0, 200'000'000};
      if (sigtimedwait(&signals, nullptr, &tick) > 0) break;
      self->receive([&](caf::down_msg&) { router_gone = true; }, caf::after(std::chrono::seconds(0)) >> [] {});
    }
  } catch (...) {
    stop_all();
    sys.await_all_actors_done();
    throw;
  }
  stop_all();
  sys.await_all_actors_done();
  std::printf("troupe worker: %s\n", router_gone ? "the connection to the router node closed; stopped" : "stopped");
  std::fflush(stdout);
  return router_gone ? 1 : 0;
}

} // namespace troupe::cli
