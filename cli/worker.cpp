// troupe worker --join HOST:PORT: replicas of a model on this machine that
// serve a router node's traffic (its router.worker_port). The link goes
// through the gate (actors/worker_gate.hpp): TCP or mutual TLS, the fleet's
// secret proven both ways, then CAF's messages relayed over it. The model and
// the engine come from the same settings as `troupe serve` ([model],
// [engine], [scheduler]: the defaults, --config FILE, --set); each of
// engine.replicas replicas gets a device of its own.
//
// A link that drops (the router node restarted, a partition, missed
// heartbeats) stops this worker's replicas; it rejoins with backoff, as new
// replica slots that the router puts in rotation once they pass its health
// checks. It stops on SIGTERM or SIGINT, or when a refusal no retry can
// change comes (a wrong secret, a model not served there).

#include "actors/wire.hpp"
#include "actors/worker_gate.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/config_source.hpp"
#include "cli/replicas.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/cuda/cuda_backend.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <exception>
#include <optional>
#include <stdexcept>

namespace troupe::cli {
namespace {

/// A join that failed; `permanent` when no retry can change it.
struct join_error : std::runtime_error {
  join_error(const std::string& what, bool permanent) : std::runtime_error(what), permanent(permanent) {}
  bool permanent;
};

/// What joining needs, the same for every try.
struct worker_context {
  caf::actor_system& sys;
  caf::scoped_actor& self;
  const server_config& cfg;
  std::string join; ///< HOST:PORT, for messages
  std::string secret;
  worker_link& link;
  std::optional<model_setup> setup; ///< prepared at the first join
  server_status& status;
  std::optional<server_metrics>& metrics; ///< the current session's replicas'
};

/// One joined session: the door (CAF's proxy of it), the replica indices,
/// and every actor this worker started for them.
struct session {
  door_actor door;
  std::vector<std::int32_t> indices;
  std::vector<caf::actor> actors;
};

struct slots {
  std::vector<std::int32_t> indices;
  std::vector<std::string> tickets;
  router_actor router;
};

// One replica slot per engine.replicas, each a fresh challenge answered with
// the fleet's secret. The door's own refusals (a model not served) are
// permanent; a link or a timeout is not.
auto ask_slots(worker_context& w, const door_actor& door) -> slots {
  slots out;
  for (int k = 0; k < w.cfg.engine.replicas; ++k) {
    std::string challenge;
    w.self->request(door, std::chrono::seconds(30), hello_atom_v)
        .receive([&](std::string& c) { challenge = std::move(c); },
                 [&](caf::error& e) { throw join_error(w.join + " did not answer: " + w.sys.render(e), false); });
    w.self->request(door, std::chrono::seconds(30), join_atom_v, w.setup->name, challenge,
                    worker_proof(w.secret, challenge))
        .receive(
            [&](std::int32_t index, router_actor& r, std::string& ticket) {
              out.indices.push_back(index);
              out.tickets.push_back(std::move(ticket));
              out.router = std::move(r);
            },
            [&](caf::error& e) {
              // The door's reason when it gave one, else CAF's rendering.
              const auto& why = e.context();
              if (why.match_elements<std::string>())
                throw join_error(w.join + " refused the worker: " + why.get_as<std::string>(0), true);
              throw join_error(w.join + " did not answer: " + w.sys.render(e), false);
            });
  }
  return out;
}

// Stops the actors and waits for them (their metrics and status go after).
void stop_and_wait(caf::scoped_actor& self, std::vector<caf::actor>& actors) {
  std::vector<caf::actor_addr> left;
  for (auto& a : actors) {
    self->monitor(a);
    left.push_back(a.address());
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  bool timed_out = false;
  self->receive_while([&] { return !left.empty() && !timed_out; })(
      [&](caf::down_msg& m) { std::erase(left, m.source); },
      caf::after(std::chrono::seconds(30)) >> [&] { timed_out = true; });
  actors.clear();
}

// The replicas of the slots, their endpoints handed to the door.
void start_replicas(worker_context& w, session& s, const slots& got) {
  std::vector<std::string> devices;
  for (const auto i : got.indices) devices.push_back("worker:" + std::to_string(i));
  w.metrics.emplace(nullptr, w.setup->name, "", *std::max_element(got.indices.begin(), got.indices.end()) + 1,
                    devices);
  for (std::size_t k = 0; k < got.indices.size(); ++k) {
    auto r = start_own_replica(w.sys, w.cfg, *w.setup, got.indices[k], got.router, &*w.metrics, &w.status,
                               devices[k]);
    s.actors.insert(s.actors.end(), r.actors.begin(), r.actors.end());
    if (!r.error.empty()) throw std::runtime_error(r.error);
    auto endpoint = spawn_endpoint(w.sys, caf::actor_cast<scheduler_actor>(r.scheduler));
    s.actors.push_back(caf::actor_cast<caf::actor>(endpoint));
    w.self->send(s.door, join_atom_v, got.indices[k], w.setup->name, endpoint, got.tickets[k]);
  }
}

// A link through the gate, CAF's door over it, and the replicas joined.
// The model is prepared once, after the first link: a wrong --join or
// secret is told before it loads.
auto join_once(worker_context& w) -> session {
  const auto link = w.link.connect();
  if (link.local_port == 0) throw join_error(link.error, link.permanent);
  auto door = w.sys.middleman().remote_actor<door_actor>("127.0.0.1", link.local_port);
  if (!door) throw join_error("cannot reach " + w.join + ": " + w.sys.render(door.error()), false);
  if (!w.setup) w.setup.emplace(prepare_for_devices(w.cfg));
  session s;
  s.door = *door;
  try {
    const auto got = ask_slots(w, s.door);
    s.indices = got.indices;
    start_replicas(w, s, got);
  } catch (...) {
    stop_and_wait(w.self, s.actors);
    throw;
  }
  w.self->monitor(s.door);
  return s;
}

void announce(const worker_context& w, const session& s, const char* what) {
  std::string list;
  for (const auto i : s.indices) list += (list.empty() ? "" : ", ") + std::to_string(i);
  std::printf("troupe worker: %s %s: replica%s %s of %s\n", what, w.join.c_str(), s.indices.size() == 1 ? "" : "s",
              list.c_str(), w.setup->name.c_str());
  std::fflush(stdout);
}

// Until a stop signal (true) or the link drops (false): the gate's link
// closed (either end, or CAF's after missed heartbeats), or CAF's proxy of
// the door went down. (Its control block, not its address: a late down of
// the last session's proxy names the same actor.)
auto wait_for_stop(worker_context& w, const session& s, sigset_t& signals) -> bool {
  for (;;) {
    const timespec tick{0, 200'000'000};
    if (sigtimedwait(&signals, nullptr, &tick) > 0) return true;
    bool down = false;
    w.self->receive([&](caf::down_msg& m) { down = down || m.source.get() == s.door.address().get(); },
                    caf::after(std::chrono::seconds(0)) >> [] {});
    if (down || w.link.closed()) return false;
  }
}

// Whether a stop signal came within `delay`.
auto signalled_within(sigset_t& signals, std::chrono::milliseconds delay) -> bool {
  const timespec t{static_cast<std::time_t>(delay.count() / 1000), static_cast<long>(delay.count() % 1000) * 1'000'000};
  return sigtimedwait(&signals, nullptr, &t) > 0;
}

// Tries again after 0.5 s, doubling to 30 s, until it joins (true) or a stop
// signal comes (false). A refusal no retry changes is thrown.
auto rejoin(worker_context& w, session& s, sigset_t& signals) -> bool {
  auto delay = std::chrono::milliseconds(500);
  for (;;) {
    if (signalled_within(signals, delay)) return false;
    try {
      s = join_once(w);
      return true;
    } catch (const join_error& e) {
      if (e.permanent) throw;
      delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::seconds(30));
      std::fprintf(stderr, "troupe worker: rejoining: %s (next try in %.1f s)\n", e.what(), delay.count() / 1000.0);
    }
  }
}

auto parse_join(const std::string& join) -> std::pair<std::string, std::uint16_t> {
  const auto colon = join.rfind(':');
  std::int64_t port = -1;
  try {
    if (colon != std::string::npos) port = std::stoll(join.substr(colon + 1));
  } catch (...) {
  }
  if (colon == std::string::npos || colon == 0 || port < 1 || port > 65535)
    throw usage_error("--join wants HOST:PORT (the router node's router.worker_port), got '" + join + "'");
  return {join.substr(0, colon), static_cast<std::uint16_t>(port)};
}

// Joins, then serves until a stop signal, rejoining whenever the link drops.
// Returns the exit code.
auto serve_joined(worker_context& w, sigset_t& signals) -> int {
  session s;
  try {
    s = join_once(w);
    announce(w, s, "joined");
    while (!wait_for_stop(w, s, signals)) {
      stop_and_wait(w.self, s.actors);
      std::printf("troupe worker: the link to %s dropped; its replicas stopped; rejoining\n", w.join.c_str());
      std::fflush(stdout);
      if (!rejoin(w, s, signals)) break;
      announce(w, s, "rejoined");
    }
  } catch (...) {
    stop_and_wait(w.self, s.actors);
    throw;
  }
  stop_and_wait(w.self, s.actors);
  std::printf("troupe worker: stopped\n");
  std::fflush(stdout);
  return 0;
}

} // namespace

auto run_worker(std::span<char* const> argv) -> int {
  auto options = config_options({});
  options.insert("join");
  const args a(argv, options, {}, 1);
  const auto join = a.required("join");
  const auto [host, port] = parse_join(join);
  const auto cfg = config_source_of(a, {}).load();
  check_model_dirs(cfg, "worker");
  auto secret = read_worker_secret(cfg); // before connecting: no credentials, no join

  auto signals = block_stop_signals();
  worker_link link(host, port, secret,
                   {cfg.router.worker_tls_cert, cfg.router.worker_tls_key, cfg.router.worker_tls_ca});
  caf::actor_system_config caf_cfg;
  configure_actors(caf_cfg, cfg, true);
  // What the actors use outlives them: declared before the system, which
  // waits for its actors as it goes (each session's are awaited before the
  // metrics change).
  server_status status;
  std::optional<server_metrics> metrics;
  caf::actor_system sys{caf_cfg};
  int code = 0;
  std::exception_ptr failure;
  {
    caf::scoped_actor self{sys};
    worker_context w{sys, self, cfg, join, std::move(secret), link, {}, status, metrics};
    try {
      code = serve_joined(w, signals);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  sys.await_all_actors_done();
  if (failure) std::rethrow_exception(failure);
  return code;
}

} // namespace troupe::cli
