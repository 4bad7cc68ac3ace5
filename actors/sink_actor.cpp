#include "actors/sink_actor.hpp"

#include "service/http/request_checks.hpp"
#include "service/http/stream_writer.hpp"
#include "service/http/anthropic_api.hpp"
#include "engine/core/rng.hpp"
#include "engine/output_processor.hpp"
#include "engine/tokenizer/detokenizer.hpp"
#include "engine/tokenizer/utf8.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <optional>

namespace troupe {
namespace {

using clock_type = std::chrono::steady_clock;

/// The submission to abort when the sink quits (shared with its attached
/// functor, which outlives the state): ids id to id + count - 1.
struct current_submission {
  scheduler_actor replica;
  request_id id = 0;
  std::int32_t count = 1;
};

/// One of the answer's choices: n of them (best_of: that many candidates),
/// each its own request at the replica (ids id, id + 1, ...: a fork group
/// there, sharing the prompt's KV).
struct choice_state {
  std::optional<stream_writer> writer; ///< its text (set as the sink starts)
  std::optional<output_processor> out;
  /// Logprobs of tokens whose bytes are not settled yet (a byte piece of an
  /// unfinished character), oldest first.
  std::deque<api::token_logprob> unsettled;
  finish_reason finished = finish_reason::none; ///< none while it runs
  double logprob_sum = 0; ///< of its tokens: best_of keeps the highest means
};

struct sink_state {
  std::shared_ptr<serving_context> ctx;
  server_status* status = nullptr;
  std::shared_ptr<http::exchange> client;
  sink_request req;
  std::vector<choice_state> choices; ///< one, or best_of (n)
  auto writer() -> stream_writer& { return *choices.front().writer; }
  /// Tokens generated, over the choices.
  auto completion_tokens() const -> std::int64_t {
    std::int64_t n = 0;
    for (const auto& c : choices) n += c.writer->completion_tokens();
    return n;
  }
  request_id id = 0; ///< the first choice's (the others' follow it)
  std::int32_t replica_index = -1;
  /// Its replica now (none before routing, or after it failed) and the id it
  /// runs there; shared with the functor that aborts it when the sink goes.
  std::shared_ptr<current_submission> current = std::make_shared<current_submission>();
  /// The request as first built (before submission moves it) and its route
  /// request: what a retry submits again.
  request original;
  policy::route_request route;
  std::vector<std::int32_t> failed; ///< replicas that failed it (avoided on retry)
  std::int32_t retries = 0;
  delivery_count undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
  bool admitted = false;
  bool stream_started = false; ///< the 200 and its headers went out
  bool done = false;
  encode_job job;              ///< kept for a capability route, which may encode again
  bool route_decided = false;  ///< the capability route chose small or large
  caf::strong_actor_ptr keep_alive; ///< itself, until it quits
  std::string echo_text; ///< with echo: the prompt's text, sent before the first token's
  clock_type::time_point first_token{};
  clock_type::time_point last_token{};
  server_metrics::request_series* series = nullptr; ///< its tenant's, of its model
  bool settled = false;              ///< its generated tokens were charged to its tenant
  std::vector<std::string> pieces;   ///< the text per token, kept for the response cache
  std::shared_ptr<grammar::compiled_grammar> grammar; ///< its grammar, compiled, held while it runs

};

using self_ptr = sink_actor::stateful_pointer<sink_state>;

// The stream's last write, then its end.
void close_stream(sink_state& st, std::string last, delivery_count credit = nullptr) {
  st.client->write(std::move(last), std::move(credit));
  st.client->end_stream();
}

// Its generated tokens to its tenant's account (once, however it ends).
void settle(sink_state& st) {
  if (st.settled || !st.req.ticket) return;
  st.settled = true;
  st.req.ticket->charge_completion(st.completion_tokens(), steady_now_s());
}

// The stream's head: the 200 and its headers (SSE), then what the stream
// opens with.
void start_stream(sink_state& st) {
  if (st.stream_started) return;
  st.stream_started = true;
  if (!st.writer().websocket()) {
    auto headers = st.req.headers;
    headers.emplace_back("Content-Type", "text/event-stream");
    headers.emplace_back("Cache-Control", "no-cache");
    st.client->start_stream(200, std::move(headers));
  }
  std::string first;
  for (auto& c : st.choices) first += c.writer->opening();
  if (!first.empty()) st.client->write(std::move(first));
}

// The most tokens the prompt may have: below the model's context, and
// within the tenant's limit.
auto prompt_limit(const sink_state& st) -> std::int64_t {
  std::int64_t limit = st.ctx->max_model_len - 1;
  if (st.req.max_input_tokens > 0) limit = std::min<std::int64_t>(limit, st.req.max_input_tokens);
  return limit;
}

// The sink's end, however the request ended: it stops watching its replica,
// then quits. A monitor is an attachable on the watched actor holding the
// watcher's address, and in CAF an actor's memory goes only when the last
// such weak reference does: without the demonitor every request served
// kept its sink's ~2.6 KB alive until the replica itself went.
void stop(self_ptr self) {
  auto& st = self->state;
  st.done = true;
  if (st.current->replica) self->demonitor(st.current->replica.address());
  self->quit();
}

constexpr const char* shutting_down = "the server is shutting down";

void fail(self_ptr self, int status, const std::string& message, const std::string& param = {},
          const std::string& code = {});

// An ask that found its actor gone: the server is shutting down.
auto on_shutdown(self_ptr self) {
  return [self](caf::error&) { fail(self, 503, shutting_down, "", "server_shutdown"); };
}

// The field a prompt's error names.
auto prompt_param(const sink_state& st) -> const char* {
  return st.req.body.kind == api::endpoint::chat ? "messages" : "prompt";
}

// Ends the request with an error: its status and an OpenAI-style body, or,
// once the stream has started, an error event and [DONE].
void fail(self_ptr self, int status, const std::string& message, const std::string& param,
          const std::string& code) {
  auto& st = self->state;
  api::api_error e;
  e.status = status;
  e.message = message;
  e.param = param;
  e.code = code;
  if (status == 429) e.type = "rate_limit_error";
  if (status == 503) e.type = "service_unavailable";
  settle(st);
  if (st.stream_started) {
    close_stream(st, st.writer().error_closing(e));
    stop(self);
    return;
  }
  auto headers = st.req.headers;
  headers.emplace_back("Content-Type", "application/json");
  if (status == 429) headers.emplace_back("Retry-After", "1");
  st.client->respond(status, std::move(headers),
                     st.req.body.wire == api::wire::anthropic ? api::anthropic::error_body(e) : api::error_body(e));
  stop(self);
}

/// Its logprobs; the alternatives' bytes are what each would have added in
/// its place (the token's own bytes are known once they settle).
auto logprob_of(const output_processor& out, const sample_result& s) -> api::token_logprob {
  api::token_logprob lp;
  lp.logprob = s.logprob;
  for (const auto& t : s.top_logprobs) lp.top.emplace_back(out.token_bytes(t.token), t.logprob);
  return lp;
}

/// The echoed prompt's logprobs: each token's bytes (as a fresh detokenizer
/// settles them, so joined they are the prompt's text), the first with none.
/// Nothing when the replica sent no score for some token (a backend without
/// prompt logprobs).
auto echo_logprobs(const sink_state& st, const std::vector<sample_result>& scores)
    -> std::optional<std::vector<api::token_logprob>> {
  const auto& prompt = st.original.prompt;
  if (scores.size() + 1 != prompt.size()) return std::nullopt;
  incremental_detokenizer d(*st.ctx->tok, true);
  for (const token_id t : prompt) d.push(t);
  d.flush();
  auto bytes = d.take_settled();
  std::vector<api::token_logprob> lps(prompt.size());
  lps[0].none = true;
  for (std::size_t i = 1; i < prompt.size(); ++i) lps[i] = logprob_of(*st.choices.front().out, scores[i - 1]);
  for (std::size_t i = 0; i < prompt.size(); ++i) lps[i].token = std::move(bytes[i]);
  return lps;
}

/// The special tokens the answer's text shows: the tool-call markers, when
/// the text is parsed for calls.
auto shown_controls(const sink_state& st) -> std::vector<token_id> {
  std::vector<token_id> ids;
  if (st.req.body.kind == api::endpoint::chat) ids = st.ctx->reasoning_markers;
  if (st.req.body.choice.what != api::tool_choice::mode::none)
    ids.insert(ids.end(), st.ctx->tool_markers.begin(), st.ctx->tool_markers.end());
  return ids;
}

// n choices, each ended: the whole response (best_of: the n with the
// highest mean token logprob, best first), or the stream's tail.
auto answer_of_choices(sink_state& st, std::string batch) -> std::string {
  auto total = st.writer().usage(); // (the prompt once, the first choice's cache figures)
  total.completion_tokens = st.completion_tokens();
  if (st.writer().streaming()) return batch + st.writer().tail(total);
  std::vector<std::size_t> order(st.choices.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto n = static_cast<std::size_t>(st.req.body.n);
  if (order.size() > n) {
    const auto mean = [&](std::size_t i) {
      const auto& c = st.choices[i];
      const auto tokens = c.writer->completion_tokens();
      return tokens > 0 ? c.logprob_sum / static_cast<double>(tokens) : 0.0;
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return mean(a) > mean(b); });
    order.resize(n);
  }
  std::vector<std::string> wholes;
  for (std::size_t k = 0; k < order.size(); ++k) {
    auto& c = st.choices[order[k]];
    c.writer->set_index(static_cast<std::int32_t>(k));
    wholes.push_back(c.writer->whole(finish_reason_name(c.finished)));
  }
  return api::combine_choices(wholes, total);
}

// Ends the response. `batch`: stream text not yet written, sent with the
// final events in one write; `credit` is this message's delivery count.
void finish(self_ptr self, finish_reason reason, std::string batch = {}, delivery_count credit = nullptr) {
  auto& st = self->state;
  const auto now = clock_type::now();
  auto& m = *st.series;
  const std::string reason_name(finish_reason_name(reason));
  auto& w = st.writer();
  settle(st);
  // A whole answer of a cacheable request is kept for its repeats.
  if (st.req.cache && (reason == finish_reason::stop || reason == finish_reason::length) &&
      st.pieces.size() == static_cast<std::size_t>(w.completion_tokens()))
    st.req.cache->put(st.req.cache_key,
                      {std::move(st.pieces), static_cast<std::uint8_t>(reason), w.prompt_tokens(), w.completion_tokens()},
                      steady_now_s());
  // A stored Responses answer: the conversation so far, and the response.
  std::string answer = st.choices.size() > 1 ? answer_of_choices(st, std::move(batch))
                       : w.streaming()        ? w.closing(std::move(batch), reason_name)
                                              : w.whole(reason_name);
  if (st.req.responses && w.response()) {
    st.req.conversation.push_back(w.response()->answer());
    st.req.responses->put(st.req.store_tenant, st.req.body.responses.id,
                          {std::move(st.req.conversation), w.response()->final_json()}, steady_now_s());
  }
  // Counted before the answer goes out: a client that reads /metrics once it
  // has its answer finds it counted (fleet_test read it a moment early).
  m.e2e_latency->Observe(std::chrono::duration<double>(now - st.req.arrival).count());
  if (w.completion_tokens() > 1)
    m.time_per_output_token->Observe(std::chrono::duration<double>(now - st.first_token).count() /
                                     static_cast<double>(w.completion_tokens() - 1));
  m.prompt_tokens->Increment(static_cast<double>(w.prompt_tokens()));
  m.generation_tokens->Increment(static_cast<double>(st.completion_tokens()));
  m.request_success(reason).Increment();
  if (w.streaming()) {
    close_stream(st, std::move(answer), std::move(credit));
  } else {
    if (credit) credit->fetch_sub(1, std::memory_order_relaxed);
    auto headers = st.req.headers;
    headers.emplace_back("Content-Type", "application/json");
    st.client->respond(200, std::move(headers), std::move(answer));
  }
  stop(self);
}

// One step's tokens (zero or one, as a rule): their text goes out in one
// write, which carries this message's delivery credit.
void replica_failed(self_ptr self);

// One of n choices ended: its finish goes out with `batch` (streamed), its
// request ends at the replica (a stop string it did not see), and the
// response ends with the last.
void end_choice(self_ptr self, std::size_t i, finish_reason reason, std::string batch) {
  auto& st = self->state;
  auto& c = st.choices[i];
  c.finished = reason;
  if (st.current->replica) caf::anon_send(st.current->replica, abort_atom_v, st.id + i);
  if (c.writer->streaming()) batch = c.writer->closing(std::move(batch), finish_reason_name(reason), false);
  const bool all = std::all_of(st.choices.begin(), st.choices.end(),
                               [](const choice_state& x) { return x.finished != finish_reason::none; });
  if (all) return finish(self, st.choices.front().finished, std::move(batch), st.undelivered);
  if (batch.empty())
    st.undelivered->fetch_sub(1, std::memory_order_relaxed);
  else
    st.client->write(std::move(batch), st.undelivered);
}

void on_tokens(self_ptr self, request_update& u) {
  auto& st = self->state;
  // (u.id: a replica this request has left, or a choice already ended.)
  const auto i = static_cast<std::size_t>(u.id - st.id);
  if (st.done || u.id < st.id || i >= st.choices.size() || st.choices[i].finished != finish_reason::none) {
    st.undelivered->fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  if (u.finished == finish_reason::error) {
    st.undelivered->fetch_sub(1, std::memory_order_relaxed);
    return replica_failed(self);
  }
  auto& c = st.choices[i];
  std::string batch;
  finish_reason ended = u.finished;
  if (u.token) {
    const auto& s = *u.token;
    const auto now = clock_type::now();
    auto& m = *st.series;
    auto& w = *c.writer;
    if (st.completion_tokens() == 0) {
      st.first_token = now;
      m.time_to_first_token->Observe(std::chrono::duration<double>(now - st.req.arrival).count());
    } else {
      m.inter_token_latency->Observe(std::chrono::duration<double>(now - st.last_token).count());
    }
    st.last_token = now;
    if (u.num_cached_tokens >= 0) w.set_cache(u.num_cached_tokens, u.num_cache_written_tokens);
    if (w.completion_tokens() == 0 && st.req.body.echo) {
      std::vector<api::token_logprob> lps;
      if (st.req.body.want_logprobs) {
        auto echoed = echo_logprobs(st, u.prompt_logprobs);
        if (!echoed) {
          st.undelivered->fetch_sub(1, std::memory_order_relaxed);
          return fail(self, 400, "echo with logprobs: this replica's backend does not compute prompt logprobs", "echo",
                      "unsupported_parameter");
        }
        lps = std::move(*echoed);
      }
      w.add_text(batch, st.echo_text, std::move(lps));
    }
    c.logprob_sum += s.logprob;
    if (st.req.body.want_logprobs) c.unsettled.push_back(logprob_of(*c.out, s));
    // The sampled token, then those a grammar forced after it (jump-forward,
    // never with logprobs; their logprob under the grammar's mask is 0).
    for (std::size_t k = 0; k <= s.forced.size(); ++k) {
      w.count_token();
      auto delta = c.out->on_token(k == 0 ? s.token : s.forced[k - 1]);
      std::vector<api::token_logprob> lps;
      if (st.req.body.want_logprobs) {
        for (auto& b : delta.token_bytes) {
          lps.push_back(std::move(c.unsettled.front()));
          c.unsettled.pop_front();
          lps.back().token = std::move(b);
        }
      }
      if (st.req.cache) st.pieces.push_back(delta.text);
      w.add_text(batch, delta.text, std::move(lps));
      if (delta.finished != finish_reason::none) {
        if (!delta.stop_reason.empty()) w.set_stop_sequence(delta.stop_reason);
        // A stop string (or EOS) the scheduler may not have acted on: the abort
        // this sink sends as it quits (or end_choice sends) frees the
        // request's blocks now rather than at max_tokens.
        ended = delta.finished;
        break;
      }
    }
  }
  if (ended != finish_reason::none) {
    if (st.choices.size() == 1) return finish(self, ended, std::move(batch), st.undelivered);
    return end_choice(self, i, ended, std::move(batch));
  }
  if (batch.empty())
    st.undelivered->fetch_sub(1, std::memory_order_relaxed);
  else
    st.client->write(std::move(batch), st.undelivered);
}

void submit_to(self_ptr self, request r, std::int32_t replica, scheduler_actor scheduler);
void route(self_ptr self, request r, const policy::route_request& q, std::vector<std::int32_t> cached);

void submit(self_ptr self, encoded& e);

// A capability route, once the small model has encoded the prompt: small or
// large by its length, max_tokens and tier. Returns false when the prompt
// is to be encoded again by the large model (submit comes back then).
auto decide_route(self_ptr self, encoded& e) -> bool {
  auto& st = self->state;
  st.route_decided = true;
  const auto& rt = *st.req.route;
  const auto n = e.num_tokens();
  const bool small = rt.fits_small(n, st.req.body.max_tokens, st.req.tier);
  auto ctx = (small ? rt.small : rt.large)->pick(st.req.session);
  st.req.headers.emplace_back("x-model-version", ctx->model_version);
  if (ctx == st.ctx) return true;
  st.ctx = std::move(ctx);
  st.series = &st.ctx->metrics->tenant(st.req.tenant);
  for (auto& c : st.choices) c.writer->set_model(st.ctx->model_name);
  st.id = st.ctx->next_request.fetch_add(st.choices.size(), std::memory_order_relaxed);
  st.job.max_tokens = prompt_limit(st);
  st.job.grammar_after_thinking = st.job.chat && st.ctx->support.reasoning;
  self->request(st.ctx->pick_tokenizer(st.job.num_bytes()), caf::infinite, encode_atom_v, st.job)
      .then([self](encoded& again) { submit(self, again); },
            on_shutdown(self));
  return false;
}

// Choice i of a request of several (n > 1, best_of): the same prompt, the
// next id, and a seed stream of its own (choice 0 keeps the request's seed,
// so it answers as the request alone would; without a seed, each choice's
// id seeds it at the executor).
auto choice_request(const request& first, std::size_t i) -> request {
  request r = first;
  r.id = first.id + i;
  r.choice = static_cast<std::int32_t>(i);
  if (r.group != 0) r.group = first.id + 1; // (the group: any id unique to it, never 0)
  if (i > 0 && r.sampling.seed) r.sampling.seed = splitmix64_mix(*r.sampling.seed + splitmix64_gamma * i);
  return r;
}

void submit(self_ptr self, encoded& e) {
  auto& st = self->state;
  if (!e.error.empty()) return fail(self, 400, e.error, prompt_param(st));
  if (st.req.route && !st.route_decided && !decide_route(self, e)) return;
  if (!e.grammar_error.empty()) {
    const bool tools = st.req.body.choice.what == api::tool_choice::mode::required ||
                       st.req.body.choice.what == api::tool_choice::mode::named;
    return fail(self, 400, e.grammar_error, tools ? "tools" : "response_format");
  }
  for (const auto& [t, bias] : st.req.body.sampling.logit_bias)
    if (t >= st.ctx->tok->vocab_size())
      return fail(self, 400,
                  "logit_bias names token " + std::to_string(t) + ", outside the vocabulary (" +
                      std::to_string(st.ctx->tok->vocab_size()) + " tokens)",
                  "logit_bias", "invalid_value");
  const bool reasoning = st.ctx->support.reasoning && st.req.body.kind == api::endpoint::chat;
  if (reasoning)
    for (auto& c : st.choices) c.writer->start_reasoning(e.opens_thinking);
  request r;
  r.id = st.id;
  const auto n = e.num_tokens(); // (at least that many when the count stopped)
  r.prompt = std::move(e.tokens);
  r.sampling = st.req.body.sampling;
  r.sampling.grammar = std::move(e.grammar); // (wrapped after the thinking, compiled: encode did)
  st.grammar = std::move(e.compiled);
  if (r.sampling.thinking_budget >= 0) { // (check_thinking_budget let it through: the model thinks)
    r.sampling.thinking_open = st.ctx->think_open;
    r.sampling.thinking_close = st.ctx->think_close;
    r.sampling.thinking_opened = e.opens_thinking;
  }
  r.priority = st.req.priority.value_or(st.req.body.priority);
  // Without tenants, the OpenAI `user` names the prefix-cache namespace and
  // the vtc account.
  const auto user = std::hash<std::string>{}(st.req.body.user);
  r.tenant = st.req.cache_namespace.value_or(user);
  r.account = st.req.account;
  r.weight = st.req.weight;
  // (A prompt the tokenizer stopped counting has at least e.at_least tokens.)
  const std::string has = e.at_least > 0 ? "the prompt has at least " : "the prompt has ";
  if (st.req.max_input_tokens > 0 && n > st.req.max_input_tokens) {
    if (st.req.ticket) st.req.ticket->reject("max_input_tokens");
    return fail(self, 400,
                has + std::to_string(n) + " tokens; the tenant's limit (max_input_tokens) is " +
                    std::to_string(st.req.max_input_tokens),
                prompt_param(st), "input_tokens_exceeded");
  }
  if (n >= st.ctx->max_model_len)
    return fail(self, 400,
                has + std::to_string(n) + " tokens; the model's context is " +
                    std::to_string(st.ctx->max_model_len) + " tokens",
                prompt_param(st));
  const auto left = static_cast<std::int32_t>(st.ctx->max_model_len - n);
  r.sampling.max_tokens = st.req.body.max_tokens        ? *st.req.body.max_tokens
                          : st.ctx->default_max_tokens ? std::min(*st.ctx->default_max_tokens, left)
                                                       : left;
  for (auto& c : st.choices) {
    c.writer->set_prompt_tokens(n); // (usage counts the prompt once)
    c.writer->set_applied_edits(e.applied_edits);
  }
  if (st.req.ticket) st.req.ticket->charge_prompt(n, steady_now_s());
  if (st.choices.size() > 1) r.group = 1; // (choice_request names it)
  r = choice_request(r, 0);
  for (std::size_t i = 0; i < st.choices.size(); ++i)
    st.choices[i].out.emplace(*st.ctx->tok, choice_request(r, i).sampling, st.ctx->eos_ids,
                              st.req.body.kind == api::endpoint::chat, shown_controls(st));
  // The router picks the replica (routing policy over the replicas' loads).
  auto& q = st.route;
  q.has_session = st.req.has_session;
  q.session = st.req.session;
  q.prompt_tokens = n;
  q.max_tokens = r.sampling.max_tokens;
  q.prompt_blocks = n > 0 ? static_cast<std::int32_t>((n - 1) / st.ctx->block_size) : 0;
  st.original = r;
  if (st.ctx->memories.empty()) return route(self, std::move(r), q, {});
  // Prefix-affine routing: each device's cache says how much of the prompt it holds.
  struct probes {
    std::vector<std::int32_t> per_device;
    std::size_t left;
  };
  auto gathered = std::make_shared<probes>(probes{std::vector<std::int32_t>(st.ctx->memories.size(), 0),
                                                  st.ctx->memories.size()});
  auto shared_r = std::make_shared<request>(std::move(r));
  for (std::size_t d = 0; d < st.ctx->memories.size(); ++d) {
    const auto done = [self, gathered, shared_r, q, d](std::int32_t blocks) {
      gathered->per_device[d] = blocks;
      if (--gathered->left > 0) return;
      const auto& ctx = *self->state.ctx;
      std::vector<std::int32_t> cached(ctx.replica_device.size());
      for (std::size_t i = 0; i < cached.size(); ++i) cached[i] = gathered->per_device[ctx.replica_device[i]];
      route(self, std::move(*shared_r), q, std::move(cached));
    };
    self->request(st.ctx->memories[d], caf::infinite, probe_atom_v, shared_r->tenant, shared_r->prompt,
                  st.ctx->block_size)
        .then(done, on_shutdown(self));
  }
}

void route(self_ptr self, request r, const policy::route_request& q, std::vector<std::int32_t> cached) {
  self->request(self->state.ctx->router, caf::infinite, route_atom_v, q, std::move(cached), self->state.failed)
      .then(
          [self, r = std::move(r)](std::int32_t replica, scheduler_actor& scheduler) mutable {
            if (self->state.done) return; // (the client left meanwhile)
            if (replica < 0 || !scheduler)
              return fail(self, 503,
                          self->state.failed.empty() ? "no replica of the model is ready"
                                                     : "the replica serving the request failed, and no other is ready",
                          "", self->state.failed.empty() ? "" : "replica_failed");
            submit_to(self, std::move(r), replica, std::move(scheduler));
          },
          on_shutdown(self));
}

// Its replica died, hangs or failed: a request that has streamed nothing
// (every non-streaming one) goes to another replica, up to max_retries
// times; a streaming one ends with an error event.
void replica_failed(self_ptr self) {
  auto& st = self->state;
  if (st.done) return;
  // Past server.drain_timeout_s the replicas are stopped under it: neither
  // a failure nor worth a retry.
  if (st.status->stopping.load())
    return fail(self, 503,
                std::string(shutting_down) + ": the request was cut off when server.drain_timeout_s ran out", "",
                "server_shutdown");
  auto& m = *st.ctx->metrics;
  const bool streamed = st.req.body.stream && st.completion_tokens() > 0;
  if (streamed || st.retries >= st.ctx->max_retries) {
    m.request_failures.Increment();
    return fail(self, 503,
                streamed ? "the replica serving the request failed mid-stream"
                         : "the replica serving the request failed, " + std::to_string(st.retries + 1) + " time(s)",
                "", "replica_failed");
  }
  ++st.retries;
  m.request_retries.Increment();
  st.failed.push_back(st.replica_index);
  if (st.current->replica) self->demonitor(st.current->replica.address());
  st.current->replica = nullptr;
  st.admitted = false;
  // New ids, so that late tokens from the failed replica are told apart.
  st.id = st.ctx->next_request.fetch_add(st.choices.size(), std::memory_order_relaxed);
  st.original.id = st.id;
  st.original = choice_request(st.original, 0); // (its group follows the id)
  auto r = st.original;
  for (std::size_t i = 0; i < st.choices.size(); ++i) {
    auto& c = st.choices[i];
    c.writer->restart();
    c.unsettled.clear();
    c.finished = finish_reason::none;
    c.logprob_sum = 0;
    c.out.emplace(*st.ctx->tok, choice_request(r, i).sampling, st.ctx->eos_ids, st.req.body.kind == api::endpoint::chat,
                  shown_controls(st));
  }
  route(self, std::move(r), st.route, {});
}

// Choice i (> 0) of the request, to the replica its first choice went to.
void submit_choice(self_ptr self, std::size_t i, std::int32_t replica) {
  auto& st = self->state;
  auto r = choice_request(st.original, i);
  self->request(st.current->replica, caf::infinite, submit_atom_v, std::move(r), caf::actor_cast<sink_actor>(self),
                st.req.arrival, st.undelivered)
      .then(
          [self, replica](admission& a) {
            auto& st = self->state;
            if (st.done || st.replica_index != replica || a.status == 0) return;
            fail(self, a.status, a.message, a.status == 400 ? "max_tokens" : "");
          },
          [self, replica](caf::error&) {
            if (self->state.replica_index == replica) replica_failed(self);
          });
}

void submit_to(self_ptr self, request r, std::int32_t replica, scheduler_actor scheduler) {
  auto& st = self->state;
  if (st.replica_index >= 0) { // a retry: the header names where it runs now (unless the stream began)
    for (auto& [k, v] : st.req.headers)
      if (k == "x-troupe-replica") v = std::to_string(replica);
  } else {
    st.req.headers.emplace_back("x-troupe-replica", std::to_string(replica));
  }
  st.replica_index = replica;
  st.current->replica = std::move(scheduler);
  st.current->id = st.id;
  st.current->count = static_cast<std::int32_t>(st.choices.size());
  self->monitor(st.current->replica);
  self->request(st.current->replica, caf::infinite, submit_atom_v, std::move(r), caf::actor_cast<sink_actor>(self),
                st.req.arrival, st.undelivered)
      .then(
          [self, replica](admission& a) {
            auto& st = self->state;
            if (st.done) return;
            if (a.status != 0) return fail(self, a.status, a.message, a.status == 400 ? "max_tokens" : "");
            st.admitted = true;
            // The other choices once the first is queued: they share its prompt's KV there.
            for (std::size_t i = 1; i < st.choices.size(); ++i) submit_choice(self, i, replica);
            if (st.req.body.stream) start_stream(st);
          },
          // The replica died before it answered, or refused it (out of
          // rotation): elsewhere. (Only while it is still this one's.)
          [self, replica](caf::error&) {
            if (self->state.replica_index == replica) replica_failed(self);
          });
}

// A response cache hit: the stored answer, streamed as it was (one event
// per token) or whole, without the engine.
void replay(self_ptr self, const cached_response& hit) {
  auto& st = self->state;
  st.req.cache = nullptr; // (nothing to store again)
  st.writer().set_prompt_tokens(hit.prompt_tokens);
  if (st.req.ticket) st.req.ticket->charge_prompt(hit.prompt_tokens, steady_now_s());
  if (st.req.body.stream) start_stream(st);
  const auto now = clock_type::now();
  st.first_token = now;
  st.series->time_to_first_token->Observe(std::chrono::duration<double>(now - st.req.arrival).count());
  auto batch = st.writer().replay(hit.pieces);
  finish(self, static_cast<finish_reason>(hit.finish), std::move(batch));
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
  st.req = std::move(req);
  // One choice, or best_of (n) candidates: ids st.id on.
  st.choices.resize(static_cast<std::size_t>(std::max(1, st.req.body.best_of)));
  st.id = st.ctx->next_request.fetch_add(st.choices.size(), std::memory_order_relaxed);
  const bool tools = st.req.body.choice.what != api::tool_choice::mode::none;
  const api::response_head head{
      st.req.body.wire == api::wire::responses ? st.req.body.responses.id
      : (st.req.body.kind == api::endpoint::chat ? "chatcmpl-" : "cmpl-") + st.req.request_id,
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
      st.ctx->model_name};
  for (std::size_t i = 0; i < st.choices.size(); ++i) {
    auto h = head;
    h.index = static_cast<std::int32_t>(i);
    st.choices[i].writer.emplace(st.req.body, st.req.ws_id, std::move(h),
                                 tools ? std::string_view(st.ctx->support.tool_parser) : std::string_view());
    st.choices[i].writer->set_seal(st.req.seal.get());
  }
  status->num_live_requests.fetch_add(1, std::memory_order_relaxed);
  self->attach_functor([status] { status->num_live_requests.fetch_sub(1, std::memory_order_relaxed); });
  // The client may go at any moment; the session calls this at most once.
  st.client->on_disconnect([addr = self->address()] {
    if (auto h = caf::actor_cast<sink_actor>(addr)) caf::anon_send(h, gone_atom_v);
  });
  // The replica died: retry elsewhere, or end with an error.
  self->set_down_handler([self](caf::down_msg& m) {
    auto& st = self->state;
    if (st.done || !st.current->replica || m.source != st.current->replica.address()) return;
    replica_failed(self);
  });
  st.series = &st.ctx->metrics->tenant(st.req.tenant);
  if (st.req.cache) {
    const auto hit = st.req.cache->get(st.req.cache_key, steady_now_s());
    if (st.req.ticket) st.req.ticket->count_cache(hit != nullptr);
    (hit ? st.series->cache_hits : st.series->cache_misses)->Increment();
    if (hit) {
      replay(self, *hit);
      return {[](tokens_atom, request_update&) {}, [](gone_atom) {}};
    }
  }
  if (auto why = api::check_request(st.req.body, st.ctx->support)) {
    fail(self, why->status, why->message, why->param, why->code);
    return {[](tokens_atom, request_update&) {}, [](gone_atom) {}};
  }
  encode_job job;
  job.chat = st.req.body.kind == api::endpoint::chat;
  if (st.req.body.choice.what != api::tool_choice::mode::none) job.tools_json = st.req.body.tools_json;
  job.template_kwargs_json = st.req.body.template_kwargs_json;
  job.edits = st.req.body.anthropic.edits;
  if (job.chat)
    job.messages = std::move(st.req.body.messages);
  else
    job.text = std::move(st.req.body.prompt);
  job.max_tokens = prompt_limit(st);
  if (st.req.body.echo)
    st.echo_text = st.req.body.prompt_tokens.empty() ? job.text : st.ctx->tok->decode(st.req.body.prompt_tokens);
  if (!job.chat) job.prompt_tokens = st.req.body.prompt_tokens;
  // A reasoning model thinks first; its grammar constrains the answer after.
  job.grammar = st.req.body.sampling.grammar;
  job.grammar_after_thinking = job.chat && st.ctx->support.reasoning;
  if (st.req.route) st.job = job;
  const auto bytes = job.num_bytes();
  self->request(st.ctx->pick_tokenizer(bytes), caf::infinite, encode_atom_v, std::move(job))
      .then([self](encoded& e) { submit(self, e); },
            on_shutdown(self));
  return {
      [self](tokens_atom, request_update& u) { on_tokens(self, u); },
      [self](gone_atom) {
        auto& st = self->state;
        if (st.done) return;
        // Quitting sends the replica the abort (after the submission, so it
        // sees it second even if its admission reply is still on the way).
        if (st.admitted) st.series->request_success(finish_reason::abort).Increment();
        settle(st);
        stop(self);
      },
  };
}

} // namespace

void spawn_sink(caf::actor_system& sys, std::shared_ptr<serving_context> ctx, server_status* status,
                std::shared_ptr<http::exchange> client, sink_request req) {
  sys.spawn(sink, std::move(ctx), status, std::move(client), std::move(req));
}

} // namespace troupe
