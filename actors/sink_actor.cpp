#include "actors/sink_actor.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <optional>

namespace troupe {
namespace {

/// The submission to abort when the sink quits (shared with its attached
/// functor, which outlives the state): ids id to id + count - 1.
struct current_submission {
  scheduler_actor replica;
  request_id id = 0;
  std::int32_t count = 1;
};

struct sink_state {
  std::shared_ptr<serving_context> ctx;
  server_status* status = nullptr;
  std::shared_ptr<http::exchange> client;
  std::optional<request_session> session;
  const capability_route* capability = nullptr;
  std::shared_ptr<const fleet> served;
  std::uint64_t session_key = 0;
  /// Its replica now (none before routing, or after it failed) and the ids it
  /// runs there; shared with the functor that aborts them when the sink goes.
  std::shared_ptr<current_submission> current = std::make_shared<current_submission>();
  /// A dispatch is out: until the router's answer or the replica's
  /// admission (whichever comes first) names the replica, the sink cannot
  /// abort there, so quitting waits. (The replica's tokens follow its
  /// admission from the same actor: none can come before it.)
  bool dispatching = false, quit_pending = false;
  delivery_count undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
  caf::strong_actor_ptr keep_alive; ///< itself, until it quits
  server_metrics::request_series* series = nullptr; ///< its tenant's, of its model
};

using self_ptr = sink_actor::stateful_pointer<sink_state>;

void run(self_ptr self, effects fx, delivery_count credit = nullptr);

auto now() -> steady_time { return std::chrono::steady_clock::now(); }

// An ask that found its actor gone: the server is shutting down.
auto on_shutdown(self_ptr self) {
  return [self](caf::error&) { run(self, self->state.session->on_shutdown(now())); };
}

// The sink's end: it stops watching its replica, then quits. A monitor is
// an attachable on the watched actor holding the watcher's address, and in
// CAF an actor's memory goes only when the last such weak reference does:
// without the demonitor every request served kept its sink alive until the
// replica itself went.
void stop(self_ptr self) {
  auto& st = self->state;
  if (st.dispatching) {
    st.quit_pending = true;
    return;
  }
  if (st.current->replica) self->demonitor(st.current->replica.address());
  self->quit();
}

void observe(sink_state& st, const effect::observe& o) {
  using what = effect::observe::what;
  auto& m = *st.series;
  switch (o.kind) {
  case what::ttft: m.time_to_first_token->Observe(o.value); break;
  case what::itl: m.inter_token_latency->Observe(o.value); break;
  case what::tpot: m.time_per_output_token->Observe(o.value); break;
  case what::e2e: m.e2e_latency->Observe(o.value); break;
  case what::prompt_tokens: m.prompt_tokens->Increment(o.value); break;
  case what::generation_tokens: m.generation_tokens->Increment(o.value); break;
  case what::success: m.request_success(o.reason).Increment(); break;
  case what::cache_hit: m.cache_hits->Increment(); break;
  case what::cache_miss: m.cache_misses->Increment(); break;
  case what::failure: st.ctx->metrics->request_failures.Increment(); break;
  case what::retry: st.ctx->metrics->request_retries.Increment(); break;
  }
}

void encode(self_ptr self, encode_job job) {
  const auto bytes = job.num_bytes();
  self->request(self->state.ctx->pick_tokenizer(bytes), caf::infinite, encode_atom_v, std::move(job))
      .then([self](encoded& e) { run(self, self->state.session->on_encoded(e, now())); }, on_shutdown(self));
}

// A capability route's model, by the session's choice (sticky per session).
void choose_model(self_ptr self, bool small) {
  auto& st = self->state;
  auto ctx = (small ? st.capability->small : st.capability->large)->pick(st.session_key);
  if (ctx != st.ctx) {
    st.ctx = ctx;
    st.series = &st.ctx->metrics->tenant(st.session->tenant());
  }
  run(self, st.session->on_model(std::move(ctx), now()));
}

// Where the dispatch of request `id` went, from the router's answer or the
// replica's admission, whichever comes first: the sink's replica now,
// watched, and aborted there as the sink goes. A quit that waited for it
// goes now (the abort then reaches the replica after the submission).
void routed(self_ptr self, request_id id, std::int32_t replica, const caf::actor& scheduler) {
  auto& st = self->state;
  auto& session = *st.session;
  if (!st.dispatching || id != session.first_id()) return; // (known already, or a stale dispatch's)
  st.dispatching = false;
  st.current->replica = caf::actor_cast<scheduler_actor>(scheduler);
  st.current->id = session.first_id();
  st.current->count = session.num_choices();
  self->monitor(st.current->replica);
  run(self, session.on_routed(replica, now()));
  if (st.quit_pending) stop(self);
}

// The replica's own answer to the dispatch: its admission (or that it failed
// the request before admitting it).
void admitted(self_ptr self, request_id id, placement& p) {
  auto& session = *self->state.session;
  if (id != session.first_id()) return; // (a dispatch the sink has left: its replica failed it)
  routed(self, id, p.replica, p.scheduler);
  if (p.failed) return run(self, session.on_replica_failed(p.replica, now()));
  run(self, session.on_admitted(p.replica, 0, p.answer, now()));
}

// The request's one dispatch: the router probes the devices' prefix caches,
// picks the replica and places the first choice there; the replica answers
// the sink itself (admitted), the router says where it went.
void dispatch(self_ptr self, effect::dispatch d) {
  auto& st = self->state;
  if (st.current->replica) self->demonitor(st.current->replica.address());
  st.current->replica = nullptr;
  st.dispatching = true;
  const auto id = d.r.id;
  self->request(st.ctx->router, caf::infinite, dispatch_atom_v, std::move(d.r), std::move(d.route),
                std::move(d.avoid), d.probe, caf::actor_cast<sink_actor>(self), st.session->arrival(), st.undelivered)
      .then(
          [self, id](placement& p) {
            auto& st = self->state;
            if (!p.answer.no_replica) return routed(self, id, p.replica, p.scheduler);
            if (!st.dispatching || id != st.session->first_id()) return;
            st.dispatching = false;
            run(self, st.session->on_no_replica(now()));
            if (st.quit_pending) stop(self);
          },
          [self, id](caf::error&) {
            auto& st = self->state;
            if (!st.dispatching || id != st.session->first_id()) return;
            st.dispatching = false;
            run(self, st.session->on_shutdown(now()));
            if (st.quit_pending) stop(self);
          });
}

// A further choice to the replica the first went to.
void submit(self_ptr self, effect::submit s) {
  auto& st = self->state;
  if (!st.current->replica) return;
  const auto choice = static_cast<std::size_t>(s.r.choice);
  const auto replica = s.replica;
  self->request(st.current->replica, caf::infinite, submit_atom_v, std::move(s.r), caf::actor_cast<sink_actor>(self),
                st.session->arrival(), st.undelivered)
      .then([self, replica, choice](admission& a) { run(self, self->state.session->on_admitted(replica, choice, a, now())); },
            // The replica died before it answered, or refused it (out of
            // rotation): elsewhere, while it is still this one's.
            [self, replica](caf::error&) { run(self, self->state.session->on_replica_failed(replica, now())); });
}

// Carries out the session's effects in order. `credit`: a tokens message's
// delivery count, carried by its last write (else counted down at once).
void run(self_ptr self, effects fx, delivery_count credit) {
  auto& st = self->state;
  std::size_t credited = fx.size();
  if (credit)
    for (std::size_t i = 0; i < fx.size(); ++i)
      if (std::holds_alternative<effect::write>(fx[i])) credited = i;
  if (credit && credited == fx.size()) credit->fetch_sub(1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < fx.size(); ++i) {
    auto& e = fx[i];
    if (auto* x = std::get_if<effect::encode>(&e)) encode(self, std::move(x->job));
    else if (auto* x = std::get_if<effect::choose_model>(&e)) choose_model(self, x->small);
    else if (auto* x = std::get_if<effect::dispatch>(&e)) dispatch(self, std::move(*x));
    else if (auto* x = std::get_if<effect::submit>(&e)) submit(self, std::move(*x));
    else if (auto* x = std::get_if<effect::start_stream>(&e)) st.client->start_stream(200, std::move(x->headers));
    else if (auto* x = std::get_if<effect::write>(&e)) st.client->write(std::move(x->text), i == credited ? credit : nullptr);
    else if (std::holds_alternative<effect::end_stream>(e)) st.client->end_stream();
    else if (auto* x = std::get_if<effect::respond>(&e)) st.client->respond(x->status, std::move(x->headers), std::move(x->body));
    else if (auto* x = std::get_if<effect::abort>(&e)) {
      if (st.current->replica) caf::anon_send(st.current->replica, abort_atom_v, x->id);
    } else if (auto* x = std::get_if<effect::observe>(&e)) observe(st, *x);
    else if (std::holds_alternative<effect::quit>(e)) stop(self);
  }
}

auto sink(self_ptr self, std::shared_ptr<serving_context> ctx, server_status* status,
          std::shared_ptr<http::exchange> client, sink_request req) -> sink_actor::behavior_type {
  auto& st = self->state;
  // A sink must outlive its replica (to retry elsewhere when it dies), but
  // the replica holds the only other strong reference: the sink keeps one
  // to itself until it quits (the state, and this, go on exit).
  st.keep_alive = caf::actor_cast<caf::strong_actor_ptr>(self);
  // However this sink ends (even by an exception), its request must not run
  // on for nobody: an abort of a request already ended is a no-op.
  self->attach_functor([cur = st.current] {
    if (cur->replica)
      for (std::int32_t i = 0; i < cur->count; ++i) caf::anon_send(cur->replica, abort_atom_v, cur->id + i);
  });
  st.ctx = std::move(ctx);
  st.status = status;
  st.client = std::move(client);
  st.capability = req.capability;
  st.served = std::move(req.served);
  st.session_key = req.session;
  st.series = &st.ctx->metrics->tenant(req.tenant);
  req.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto* next = &st.ctx->next_request;
  st.session.emplace(
      st.ctx, std::move(static_cast<session_request&>(req)),
      [next](std::int32_t count) { return next->fetch_add(static_cast<request_id>(count), std::memory_order_relaxed); },
      &status->stopping);
  status->num_live_requests.fetch_add(1, std::memory_order_relaxed);
  self->attach_functor([status] { status->num_live_requests.fetch_sub(1, std::memory_order_relaxed); });
  // The client may go at any moment; the session calls this at most once.
  st.client->on_disconnect([addr = self->address()] {
    if (auto h = caf::actor_cast<sink_actor>(addr)) caf::anon_send(h, gone_atom_v);
  });
  // The replica died: retry elsewhere, or end with an error.
  self->set_down_handler([self](caf::down_msg& m) {
    auto& st = self->state;
    if (!st.current->replica || m.source != st.current->replica.address()) return;
    run(self, st.session->on_replica_failed(st.session->replica(), now()));
  });
  run(self, st.session->start(now()));
  return {
      [self](tokens_atom, request_update& u) { run(self, self->state.session->on_tokens(u, now()), self->state.undelivered); },
      [self](gone_atom) { run(self, self->state.session->on_client_gone(now())); },
      [self](admitted_atom, request_id id, placement& p) { admitted(self, id, p); },
  };
}

} // namespace

void spawn_sink(caf::actor_system& sys, std::shared_ptr<serving_context> ctx, server_status* status,
                std::shared_ptr<http::exchange> client, sink_request req) {
  sys.spawn(sink, std::move(ctx), status, std::move(client), std::move(req));
}

} // namespace troupe
