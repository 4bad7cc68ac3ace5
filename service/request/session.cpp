#include "service/request/session.hpp"

#include "service/request/admission.hpp"

#include <algorithm>

namespace troupe {
using namespace session_detail;
namespace {

constexpr const char* shutting_down = "the server is shutting down";

/// Whether an answer's text is parsed in the model's tool-call format: with
/// tools, and always in a chat with harmony (gpt-oss), whose reasoning and
/// answer are channels of that format.
auto parses_tool_format(const model_profile& m, const api::generation_request& body) -> bool {
  return body.choice.what != api::tool_choice::mode::none ||
         (body.kind == api::endpoint::chat && m.support.tool_parser == "harmony");
}

/// The special tokens the answer's text shows: the reasoning markers (chat)
/// and the tool-call markers, when the text is parsed for calls.
auto shown_controls(const model_profile& m, const api::generation_request& body) -> std::vector<token_id> {
  std::vector<token_id> ids;
  if (body.kind == api::endpoint::chat) ids = m.reasoning_markers;
  if (parses_tool_format(m, body)) ids.insert(ids.end(), m.tool_markers.begin(), m.tool_markers.end());
  return ids;
}

} // namespace

request_session::request_session(std::shared_ptr<const model_profile> model, session_request req,
                                 std::function<request_id(std::int32_t)> ids, const std::atomic<bool>* stopping)
    : model_(std::move(model)), req_(std::move(req)), ids_(std::move(ids)), stopping_(stopping) {
  const auto& body = req_.body;
  const bool tools = parses_tool_format(*model_, body);
  const api::response_head head{req_.protocol->response_id(body, req_.request_id), req_.created, model_->model_name};
  // One choice, or best_of (n) candidates: ids id_ on.
  choices_.open(static_cast<std::size_t>(std::max(1, body.best_of)), *req_.protocol, body, head,
                tools ? std::string_view(model_->support.tool_parser) : std::string_view(), req_.seal.get());
  id_ = ids_(num_choices());
}

auto request_session::start(steady_time now) -> effects {
  effects fx;
  if (req_.cache) {
    const auto hit = req_.cache->get(req_.cache_key, seconds(now));
    if (req_.ticket) req_.ticket->count_cache(hit != nullptr);
    fx.push_back(observe(hit ? effect::observe::what::cache_hit : effect::observe::what::cache_miss));
    if (hit) {
      append(fx, replay(*hit, now));
      return fx;
    }
  }
  if (auto why = check_before_encoding(req_.body, model_->support)) {
    append(fx, fail(*why, now));
    return fx;
  }
  phase_ = phase::encoding;
  fx.push_back(effect::encode{encode_job_of()});
  return fx;
}

auto request_session::encode_job_of() -> encode_job {
  auto& body = req_.body;
  encode_job job;
  job.chat = body.kind == api::endpoint::chat;
  if (body.choice.what != api::tool_choice::mode::none) job.tools_json = body.tools_json;
  job.template_kwargs_json = body.template_kwargs_json;
  job.edits = body.edits;
  if (job.chat)
    job.messages = std::move(body.messages);
  else
    job.text = std::move(body.prompt);
  job.max_tokens = prompt_limit();
  if (body.echo) echo_text_ = body.prompt_tokens.empty() ? job.text : model_->tok->decode(body.prompt_tokens);
  if (!job.chat) job.prompt_tokens = body.prompt_tokens;
  // A reasoning model thinks first; its grammar constrains the answer after.
  job.grammar = body.sampling.grammar;
  job.grammar_after_thinking = job.chat && model_->support.reasoning;
  job.grammar_in_final_channel = job.chat && model_->support.tool_parser == "harmony" &&
                                 body.choice.what != api::tool_choice::mode::required &&
                                 body.choice.what != api::tool_choice::mode::named;
  if (req_.route) job_ = job;
  return job;
}

// The most tokens the prompt may have: below the model's context, and
// within the tenant's limit.
auto request_session::prompt_limit() const -> std::int64_t {
  std::int64_t limit = model_->max_model_len - 1;
  if (req_.max_input_tokens > 0) limit = std::min<std::int64_t>(limit, req_.max_input_tokens);
  return limit;
}

auto request_session::on_encoded(encoded& e, steady_time now) -> effects {
  if (done()) return {};
  if (!e.error.empty()) return fail({400, e.error, "invalid_request_error", prompt_param(), ""}, now);
  if (req_.route && !route_decided_) { // a capability route: small or large, by the encoded prompt
    route_decided_ = true;
    const bool small = req_.route->fits_small(e.num_tokens(), req_.body.max_tokens, req_.tier);
    pending_ = std::move(e);
    return {effect::choose_model{small}};
  }
  return admit(e, now);
}

auto request_session::on_model(std::shared_ptr<const model_profile> model, steady_time now) -> effects {
  if (done() || !pending_) return {};
  req_.headers.emplace_back("x-model-version", model->model_version);
  if (model == model_) {
    auto e = std::move(*pending_);
    pending_.reset();
    return admit(e, now);
  }
  // The large model encodes the prompt again, with its own tokenizer and template.
  pending_.reset();
  model_ = std::move(model);
  for (auto& c : choices_) c.writer->set_model(model_->model_name);
  id_ = ids_(num_choices());
  job_.max_tokens = prompt_limit();
  job_.grammar_after_thinking = job_.chat && model_->support.reasoning;
  return {effect::encode{job_}};
}

// The encoded prompt's checks, then its request, its choices and its route.
auto request_session::admit(encoded& e, steady_time now) -> effects {
  const auto n = e.num_tokens(); // (at least that many when the count stopped)
  if (auto why = check_encoded(req_.body, *model_, req_.max_input_tokens, e)) {
    if (why->code == "input_tokens_exceeded" && req_.ticket) req_.ticket->reject("max_input_tokens");
    return fail(*why, now);
  }
  const bool reasoning = model_->support.reasoning && req_.body.kind == api::endpoint::chat;
  if (reasoning)
    for (auto& c : choices_) c.writer->start_reasoning(e.opens_thinking);
  auto r = build_request(e, n);
  for (auto& c : choices_) {
    c.writer->set_prompt_tokens(n); // (usage counts the prompt once)
    c.writer->set_applied_edits(e.applied_edits);
  }
  if (req_.ticket) req_.ticket->charge_prompt(n, seconds(now));
  if (choices_.size() > 1) r.group = 1; // (choice_request names it)
  original_ = choice_request(r, 0);
  open_outputs();
  // The router picks the replica (routing policy over the replicas' loads).
  route_.has_session = req_.has_session;
  route_.session = req_.session;
  route_.prompt_tokens = n;
  route_.max_tokens = original_.sampling.max_tokens;
  route_.prompt_blocks = n > 0 ? static_cast<std::int32_t>((n - 1) / model_->block_size) : 0;
  phase_ = phase::routing;
  return {effect::dispatch{original_, route_, failed_, true}};
}

auto request_session::build_request(encoded& e, std::int64_t n) -> request {
  const auto& body = req_.body;
  request r;
  r.id = id_;
  r.prompt = std::move(e.tokens);
  r.sampling = body.sampling;
  r.sampling.grammar = std::move(e.grammar); // (wrapped after the thinking, compiled: encode did)
  grammar_ = std::move(e.compiled);
  if (r.sampling.thinking_budget >= 0) { // (check_request let it through: the model thinks)
    r.sampling.thinking_open = model_->think_open;
    r.sampling.thinking_close = model_->think_close;
    r.sampling.thinking_opened = e.opens_thinking;
  }
  r.priority = req_.priority.value_or(body.priority);
  // Without tenants, the OpenAI `user` names the prefix-cache namespace and
  // the vtc account.
  const auto user = std::hash<std::string>{}(body.user);
  r.tenant = req_.cache_namespace.value_or(user);
  r.account = req_.account;
  r.weight = req_.weight;
  const auto left = static_cast<std::int32_t>(model_->max_model_len - n);
  r.sampling.max_tokens = body.max_tokens           ? *body.max_tokens
                          : model_->default_max_tokens ? std::min(*model_->default_max_tokens, left)
                                                       : left;
  return r;
}

// Each choice's output processor (its own seed stream, the same stops).
void request_session::open_outputs() {
  for (std::size_t i = 0; i < choices_.size(); ++i)
    choices_[i].writer->start_tokens(req_.body.want_logprobs, *model_->tok, choice_request(original_, i).sampling,
                                     model_->eos_ids, req_.body.kind == api::endpoint::chat,
                                     shown_controls(*model_, req_.body));
}

auto request_session::on_routed(std::int32_t replica, steady_time) -> effects {
  if (done()) return {}; // (the client left meanwhile)
  if (replica_ >= 0) { // a retry: the header names where it runs now (unless the stream began)
    for (auto& [k, v] : req_.headers)
      if (k == "x-troupe-replica") v = std::to_string(replica);
  } else {
    req_.headers.emplace_back("x-troupe-replica", std::to_string(replica));
  }
  replica_ = replica;
  phase_ = phase::admitting;
  return {};
}

auto request_session::on_no_replica(steady_time now) -> effects {
  if (done()) return {};
  return fail({503,
               failed_.empty() ? "no replica of the model is ready"
                               : "the replica serving the request failed, and no other is ready",
               "service_unavailable", "", failed_.empty() ? "" : "replica_failed"},
              now);
}

auto request_session::on_admitted(std::int32_t replica, std::size_t choice, const admission& a, steady_time now)
    -> effects {
  if (done() || replica != replica_) return {};
  if (a.status != 0) return fail({a.status, a.message, "", a.status == 400 ? "max_tokens" : "", ""}, now);
  if (choice > 0) return {};
  phase_ = phase::streaming;
  // The other choices once the first is queued: they share its prompt's KV there.
  effects fx;
  for (std::size_t i = 1; i < choices_.size(); ++i) fx.push_back(effect::submit{choice_request(original_, i), replica});
  if (req_.body.stream) start_stream(fx);
  return fx;
}

// Its replica died, hangs or failed: a request that has streamed nothing
// (every non-streaming one) goes to another replica, up to max_retries
// times; a streaming one ends with an error.
auto request_session::on_replica_failed(std::int32_t replica, steady_time now) -> effects {
  if (done() || replica != replica_) return {};
  return replica_failed(now);
}

auto request_session::replica_failed(steady_time now) -> effects {
  // Past server.drain_timeout_s the replicas are stopped under it: neither
  // a failure nor worth a retry.
  if (stopping_ && stopping_->load())
    return fail({503, std::string(shutting_down) + ": the request was cut off when server.drain_timeout_s ran out",
                 "service_unavailable", "", "server_shutdown"},
                now);
  const bool streamed = req_.body.stream && choices_.completion_tokens() > 0;
  if (streamed || retries_ >= model_->max_retries) {
    effects fx{observe(effect::observe::what::failure)};
    append(fx, fail({503,
                     streamed ? "the replica serving the request failed mid-stream"
                              : "the replica serving the request failed, " + std::to_string(retries_ + 1) + " time(s)",
                     "service_unavailable", "", "replica_failed"},
                    now));
    return fx;
  }
  ++retries_;
  failed_.push_back(replica_);
  // New ids, so that late tokens from the failed replica are told apart.
  id_ = ids_(num_choices());
  original_.id = id_;
  original_ = choice_request(original_, 0); // (its group follows the id)
  choices_.restart();
  open_outputs();
  phase_ = phase::routing;
  return {observe(effect::observe::what::retry), effect::dispatch{original_, route_, failed_, false}};
}

auto request_session::on_client_gone(steady_time now) -> effects {
  if (done()) return {};
  // Quitting aborts the request at its replica (after the submission, so
  // the replica sees it second even if its admission reply is still on the way).
  effects fx;
  if (phase_ == phase::streaming) fx.push_back(observe(effect::observe::what::success, 0, finish_reason::abort));
  settle(now);
  phase_ = phase::finished;
  fx.push_back(effect::quit{});
  return fx;
}

auto request_session::on_shutdown(steady_time now) -> effects {
  if (done()) return {};
  return fail({503, shutting_down, "service_unavailable", "", "server_shutdown"}, now);
}

// Its generated tokens to its tenant's account (once, however it ends).
void request_session::settle(steady_time now) {
  if (settled_ || !req_.ticket) return;
  settled_ = true;
  req_.ticket->charge_completion(choices_.completion_tokens(), seconds(now));
}

// The stream's head: the 200 and its headers (SSE), then what the stream
// opens with.
void request_session::start_stream(effects& fx) {
  if (stream_started_) return;
  stream_started_ = true;
  if (choices_.writer().sse()) {
    auto headers = req_.headers;
    headers.emplace_back("Content-Type", "text/event-stream");
    headers.emplace_back("Cache-Control", "no-cache");
    fx.push_back(effect::start_stream{std::move(headers)});
  }
  std::string first;
  for (auto& c : choices_) first += c.writer->opening();
  if (!first.empty()) fx.push_back(effect::write{std::move(first)});
}

// The field a prompt's error names.
auto request_session::prompt_param() const -> const char* {
  return req_.body.kind == api::endpoint::chat ? "messages" : "prompt";
}

// Ends the request with an error: its status and the API's error body, or,
// once the stream has started, an error event and the stream's end.
auto request_session::fail(api::api_error e, steady_time now) -> effects {
  e.type = e.status == 429 ? "rate_limit_error" : e.status == 503 ? "service_unavailable" : "invalid_request_error";
  settle(now);
  phase_ = phase::failed;
  if (stream_started_) return {effect::write{choices_.writer().error_closing(e)}, effect::end_stream{}, effect::quit{}};
  auto headers = req_.headers;
  headers.emplace_back("Content-Type", "application/json");
  if (e.status == 429) headers.emplace_back("Retry-After", "1");
  return {effect::respond{e.status, std::move(headers),
                          req_.protocol->error_body(e)},
          effect::quit{}};
}

} // namespace troupe
