#include "actors/wire.hpp"

#include "settings/toml_settings.hpp"
#include "service/tenancy/sha256.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <unordered_map>

namespace troupe {
namespace {

// ---- the router node's side ------------------------------------------------

// (A constructor of its own: CAF 0.17 would build an aggregate state from
// the actor's pointer, C++20 parenthesized aggregate init allowing it.)
struct proxy_state {
  proxy_state() = default;
  endpoint_actor endpoint;
  struct client {
    sink_actor sink;
    delivery_count undelivered;
  };
  std::unordered_map<request_id, client> sinks;
  /// Placed requests whose admission has not come back from the worker:
  /// their tokens wait here, so that the sink hears the admission first.
  std::unordered_map<request_id, std::vector<request_update>> placing;
  /// Tokens to the request's sink (the delivery count counts them).
  void deliver(request_update u) {
    const auto it = sinks.find(u.id);
    if (it == sinks.end()) return;
    it->second.undelivered->fetch_add(1, std::memory_order_relaxed);
    const bool last = u.finished != finish_reason::none;
    caf::anon_send(it->second.sink, tokens_atom_v, std::move(u));
    if (last) sinks.erase(it);
  }
};

using proxy_ptr = proxy_actor::stateful_pointer<proxy_state>;

// A request the router placed here: submitted to the worker, and its
// admission sent to the sink (then any tokens held meanwhile).
void place(proxy_ptr self, request r, sink_actor sink, steady_time arrival, delivery_count undelivered,
           std::int32_t replica) {
  const auto id = r.id;
  auto& st = self->state;
  st.sinks[id] = {sink, std::move(undelivered)};
  st.placing[id];
  const auto age = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - arrival);
  const auto answer = [self, sink, id, replica](admission a, bool failed) {
    auto& st = self->state;
    if (failed || a.status != 0) st.sinks.erase(id);
    self->send(sink, admitted_atom_v, id, placement{std::move(a), replica, caf::actor_cast<caf::actor>(self), failed});
    auto held = std::move(st.placing[id]);
    st.placing.erase(id);
    for (auto& u : held) st.deliver(std::move(u));
  };
  self->request(st.endpoint, caf::infinite, rsubmit_atom_v, std::move(r), static_cast<std::int64_t>(age.count()))
      .then([answer](admission& a) { answer(std::move(a), false); },
            [answer](caf::error&) { answer(admission{}, true); });
}

auto proxy(proxy_ptr self, endpoint_actor endpoint) -> proxy_actor::behavior_type {
  self->state.endpoint = endpoint;
  // The worker died or its connection dropped: this replica goes with it,
  // and the router and the sinks (which monitor it) learn of it.
  self->monitor(endpoint);
  self->set_down_handler([self](caf::down_msg& m) { self->quit(m.reason); });
  return {
      [self](submit_atom, request& r, sink_actor& sink, steady_time arrival,
             delivery_count& undelivered) -> caf::typed_response_promise<admission> {
        auto rp = self->make_response_promise<admission>();
        const auto id = r.id;
        self->state.sinks[id] = {std::move(sink), std::move(undelivered)};
        const auto age = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - arrival);
        self->request(self->state.endpoint, caf::infinite, rsubmit_atom_v, std::move(r),
                      static_cast<std::int64_t>(age.count()))
            .then(
                [self, rp, id](admission& a) mutable {
                  if (a.status != 0) self->state.sinks.erase(id);
                  rp.deliver(std::move(a));
                },
                [self, rp, id](caf::error& e) mutable {
                  self->state.sinks.erase(id);
                  rp.deliver(std::move(e));
                });
        return rp;
      },
      [self](place_atom, request& r, sink_actor& sink, steady_time arrival, delivery_count& undelivered,
             std::int32_t replica) { place(self, std::move(r), std::move(sink), arrival, std::move(undelivered), replica); },
      [self](abort_atom, request_id id) {
        self->state.sinks.erase(id); // (its sink is gone or done: late tokens go nowhere)
        self->send(self->state.endpoint, abort_atom_v, id);
      },
      [](step_atom) {},
      [](refill_atom) {},
      [self](evacuate_atom) { self->send(self->state.endpoint, evacuate_atom_v); },
      [self](fault_atom, const std::string& f) { self->send(self->state.endpoint, fault_atom_v, f); },
      [self](tokens_atom, request_update& u) {
        auto& st = self->state;
        if (const auto it = st.placing.find(u.id); it != st.placing.end()) return it->second.push_back(std::move(u));
        st.deliver(std::move(u));
      },
  };
}

// 32 random bytes, hex: a challenge or a ticket.
auto random_token() -> std::string {
  static thread_local std::random_device device;
  sha256_digest d{};
  for (auto& b : d) b = static_cast<std::uint8_t>(device());
  return to_hex(d);
}

// What worker_proof writes as hex.
auto proof_digest(std::string_view secret, std::string_view challenge) -> sha256_digest {
  return hmac_sha256(secret, std::string("troupe worker join\n").append(challenge));
}

struct door_state {
  door_state() = default;
  /// Stopped with the door, at shutdown (shared with the functor that
  /// does it, which runs after the state is gone).
  std::shared_ptr<std::vector<proxy_actor>> proxies = std::make_shared<std::vector<proxy_actor>>();
  std::string secret;
  /// Challenges handed out and not yet used, oldest first, with when.
  std::deque<std::pair<std::string, std::chrono::steady_clock::time_point>> challenges;
  /// Tickets of joins whose endpoint has not come yet: (index, model).
  std::unordered_map<std::string, std::pair<std::int32_t, std::string>> tickets;
};

constexpr std::size_t k_max_challenges = 1024;
constexpr auto k_challenge_life = std::chrono::seconds(60);

// Whether `challenge` was handed out within its life and `proof` is the
// secret's answer to it; either way the challenge is spent.
auto admits(door_state& st, const std::string& challenge, const std::string& proof) -> bool {
  const auto now = std::chrono::steady_clock::now();
  while (!st.challenges.empty() && now - st.challenges.front().second > k_challenge_life) st.challenges.pop_front();
  const auto it = std::find_if(st.challenges.begin(), st.challenges.end(),
                               [&](const auto& c) { return c.first == challenge; });
  if (it == st.challenges.end()) return false;
  st.challenges.erase(it);
  const auto got = parse_sha256_hex(proof);
  return got && equal_constant_time(proof_digest(st.secret, challenge), *got);
}

auto door(door_actor::stateful_pointer<door_state> self, std::shared_ptr<const fleet> models, std::string secret)
    -> door_actor::behavior_type {
  self->state.secret = std::move(secret);
  self->attach_functor([proxies = self->state.proxies] {
    for (auto& p : *proxies) caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  });
  return {
      [self](hello_atom) {
        auto& st = self->state;
        if (st.challenges.size() >= k_max_challenges) st.challenges.pop_front();
        st.challenges.emplace_back(random_token(), std::chrono::steady_clock::now());
        return st.challenges.back().first;
      },
      [self, models](join_atom, const std::string& model, const std::string& challenge,
                     const std::string& proof) -> caf::result<std::int32_t, router_actor, std::string> {
        if (!admits(self->state, challenge, proof)) {
          std::fprintf(stderr, "troupe: refused a worker: its proof does not match router.worker_secret_file\n");
          return caf::make_error(caf::sec::runtime_error,
                                 std::string("wrong credentials: the worker's router.worker_secret_file does not "
                                             "match the router node's"));
        }
        const auto* m = models->find(model);
        if (!m) {
          std::string known;
          for (const auto& x : models->models) known += (known.empty() ? "'" : ", '") + x.name + "'";
          return caf::make_error(caf::sec::runtime_error, "no model '" + model + "' is served here; served: " + known);
        }
        auto rp = self->make_response_promise<std::int32_t, router_actor, std::string>();
        const auto router = m->stable->router;
        self->request(router, std::chrono::seconds(10), join_atom_v)
            .then(
                [self, rp, router, model](std::int32_t index) mutable {
                  auto ticket = random_token();
                  self->state.tickets.emplace(ticket, std::pair{index, model});
                  rp.deliver(index, router, std::move(ticket));
                },
                [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [self, models](join_atom, std::int32_t index, const std::string& model, const endpoint_actor& endpoint,
                     const std::string& ticket) {
        auto& tickets = self->state.tickets;
        const auto t = tickets.find(ticket);
        if (t == tickets.end() || t->second != std::pair{index, model}) {
          std::fprintf(stderr, "troupe: refused an endpoint for replica %d: no such ticket\n", index);
          return;
        }
        tickets.erase(t);
        const auto* m = models->find(model);
        if (!m || index < 0 || !endpoint) return;
        auto p = self->spawn(proxy, endpoint);
        self->state.proxies->push_back(p);
        std::fprintf(stderr, "troupe: replica %d of %s joined from a worker\n", index, model.c_str());
        // (remote: the router records its series from its load reports)
        self->send(m->stable->router, join_atom_v, index, caf::actor_cast<scheduler_actor>(p), false, true);
      },
  };
}

// ---- the worker's side -----------------------------------------------------

struct endpoint_state {
  endpoint_state() = default;
  scheduler_actor scheduler;
  struct origin {
    caf::strong_actor_ptr proxy;
    delivery_count undelivered;
  };
  std::unordered_map<request_id, origin> origins;
};

auto endpoint(endpoint_actor::stateful_pointer<endpoint_state> self, scheduler_actor scheduler)
    -> endpoint_actor::behavior_type {
  self->state.scheduler = scheduler;
  self->monitor(scheduler);
  self->set_down_handler([self](caf::down_msg& m) { self->quit(m.reason); });
  return {
      [self](rsubmit_atom, request& r, std::int64_t age_ns) -> caf::typed_response_promise<admission> {
        auto& st = self->state;
        // (The sender first: making the promise takes it from the message.)
        auto origin = self->current_sender();
        auto rp = self->make_response_promise<admission>();
        const auto id = r.id;
        auto undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
        st.origins[id] = {std::move(origin), undelivered};
        const auto arrival = std::chrono::steady_clock::now() - std::chrono::nanoseconds(age_ns);
        self->request(st.scheduler, caf::infinite, submit_atom_v, std::move(r), caf::actor_cast<sink_actor>(self),
                      arrival, std::move(undelivered))
            .then(
                [self, rp, id](admission& a) mutable {
                  if (a.status != 0) self->state.origins.erase(id);
                  rp.deliver(std::move(a));
                },
                // Its scheduler is gone: an error (not a refusal), so that
                // the request is retried on another replica.
                [self, rp, id](caf::error& e) mutable {
                  self->state.origins.erase(id);
                  rp.deliver(std::move(e));
                });
        return rp;
      },
      [self](abort_atom, request_id id) {
        self->state.origins.erase(id);
        self->send(self->state.scheduler, abort_atom_v, id);
      },
      [self](evacuate_atom) { self->send(self->state.scheduler, evacuate_atom_v); },
      [self](fault_atom, const std::string& f) { self->send(self->state.scheduler, fault_atom_v, f); },
      // Its scheduler's tokens go to the proxy that submitted them: counted
      // delivered once on the wire (backpressure covers this process's mailboxes).
      [self](tokens_atom, request_update& u) {
        auto& st = self->state;
        const auto it = st.origins.find(u.id);
        if (it == st.origins.end()) return;
        it->second.undelivered->fetch_sub(1, std::memory_order_relaxed);
        const bool last = u.finished != finish_reason::none;
        self->send(caf::actor_cast<proxy_actor>(it->second.proxy), tokens_atom_v, std::move(u));
        if (last) st.origins.erase(it);
      },
      [](gone_atom) {},
  };
}

} // namespace

void add_wire_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<request>("troupe::request");
  cfg.add_message_type<request_update>("troupe::request_update");
  cfg.add_message_type<admission>("troupe::admission");
  cfg.add_message_type<replica_report>("troupe::replica_report");
  cfg.add_message_type<router_actor>("troupe::router_actor");
  cfg.add_message_type<endpoint_actor>("troupe::endpoint_actor");
  cfg.add_message_type<door_actor>("troupe::door_actor");
  cfg.add_message_type<proxy_actor>("troupe::proxy_actor");
}

auto spawn_door(caf::actor_system& sys, std::shared_ptr<const fleet> models, std::string secret) -> door_actor {
  return sys.spawn(door, std::move(models), std::move(secret));
}

auto read_worker_secret(const server_config& config) -> std::string {
  const auto& path = config.router.worker_secret_file;
  if (path.empty())
    throw config_error("router.worker_secret_file: workers must prove who they are: name a file holding a shared "
                       "secret of at least 16 bytes (the same on the router node and every worker)");
  auto secret = std::string{};
  try {
    secret = settings::read_file(path);
  } catch (const config_error& e) {
    throw config_error("router.worker_secret_file: " + std::string(e.what()));
  }
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) secret.pop_back();
  if (secret.size() < 16)
    throw config_error("router.worker_secret_file: " + path + ": the secret is shorter than 16 bytes");
  return secret;
}

auto worker_proof(std::string_view secret, std::string_view challenge) -> std::string {
  return to_hex(proof_digest(secret, challenge));
}

auto spawn_endpoint(caf::actor_system& sys, scheduler_actor scheduler) -> endpoint_actor {
  return sys.spawn(endpoint, std::move(scheduler));
}

} // namespace troupe
