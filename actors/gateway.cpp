#include "actors/gateway.hpp"
#include "base/json_text.hpp"

#include "service/http/responses/responses_protocol.hpp"
#include "service/http/anthropic/anthropic_api.hpp"
#include "service/http/responses/responses_api.hpp"

#include "actors/admin_api.hpp"
#include "service/http/chat_page.hpp"
#include "service/http/openai/openai_api.hpp"
#include "service/http/openai/openai_format.hpp"
#include "service/http/json_reader.hpp"
#include "service/http/request_keys.hpp"
#include "actors/sink_actor.hpp"

#include <caf/all.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace troupe {

namespace {

auto hash_of(std::string_view s) -> std::uint64_t { return std::hash<std::string_view>{}(s) | 1; }


} // namespace

gateway::gateway(caf::actor_system& sys, server_status& status, gateway_options options)
  : sys_(sys), status_(status), options_(std::move(options)) {
  if (!options_.seal) options_.seal = std::make_shared<const api::reasoning_seal>();
  if (!options_.tenants_file.empty()) {
    tenants_ = std::make_unique<tenant_registry>(load_tenants(options_.tenants_file), steady_now_s());
    watcher_.emplace(options_.tenants_file, *tenants_);
  }
  if (options_.response_cache_bytes > 0)
    cache_ = std::make_unique<response_cache>(options_.response_cache_bytes, options_.response_cache_ttl_s);
  // (Of 0 bytes it keeps nothing, and still gives ids.)
  responses_ = std::make_unique<response_store>(options_.responses_store_bytes, options_.responses_ttl_s);
}

auto gateway::unauthenticated(bool key_given) -> api::api_error {
  return key_given ? api::api_error{401, "the API key is not valid", "authentication_error", "", "invalid_api_key"}
                   : api::api_error{401, "an API key is required (Authorization: Bearer <key>)", "authentication_error",
                                    "", "missing_api_key"};
}

void gateway::set_fleet(std::shared_ptr<const fleet> f) {
  std::lock_guard lock(mutex_);
  if (f && !rejections_)
    rejections_ = &prometheus::BuildCounter()
                       .Name("troupe_tenant_rejections_total")
                       .Help("Requests refused by the gateway, by tenant and reason.")
                       .Register(*f->models.front().stable->metrics->registry());
  if (f && !unknown_fields_)
    unknown_fields_ = &prometheus::BuildCounter()
                           .Name("troupe_unknown_fields_total")
                           .Help("Request fields in nobody's table (docs/api.md), accepted or refused, by API and name.")
                           .Register(*f->models.front().stable->metrics->registry());
  fleet_ = std::move(f);
}

void gateway::count_rejection(const std::string& tenant, const std::string& reason) {
  prometheus::Family<prometheus::Counter>* family;
  {
    std::lock_guard lock(mutex_);
    family = rejections_;
  }
  if (family) family->Add({{"tenant", tenant}, {"reason", reason}}).Increment();
}

namespace {

/// A client's name, safe in a header and a log line: [A-Za-z0-9_.-], at most 64 bytes.
auto header_safe(std::string_view raw) -> std::string {
  std::string name;
  for (const char c : raw.substr(0, 64))
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ? c : '?';
  return name;
}

/// Reasoning the client kept sealed (thinking signatures, encrypted_content;
/// one a line) opened for the template, where a message shows none; one of
/// another key, or altered, stays out.
void open_sealed(const api::reasoning_seal& seal, std::vector<chat_message>& messages) {
  for (auto& m : messages) {
    if (m.reasoning_sealed.empty()) continue;
    if (m.reasoning_content.empty()) {
      std::string_view rest = m.reasoning_sealed;
      while (!rest.empty()) {
        const auto line = rest.substr(0, rest.find('\n'));
        rest.remove_prefix(std::min(rest.size(), line.size() + 1));
        if (auto text = seal.open(line)) m.reasoning_content += *text;
      }
    }
    m.reasoning_sealed.clear();
  }
}

} // namespace

auto gateway::check_unknown_fields(std::string_view api, const std::vector<std::string>& fields, http::header_list& headers)
    -> std::optional<api::api_error> {
  if (fields.empty()) return std::nullopt;
  // Names are the client's: shown safely in a header and a log line, and a
  // client inventing names cannot grow the series or the log without bound.
  constexpr std::size_t max_unknown_names = 256;
  std::string header;
  for (const auto& raw : fields) {
    const auto name = header_safe(raw);
    header += (header.empty() ? "" : ", ") + name;
    bool fresh = false, known = false;
    prometheus::Family<prometheus::Counter>* family;
    {
      std::lock_guard lock(mutex_);
      family = unknown_fields_;
      const auto key = std::string(api) + " " + name;
      known = unknown_seen_.contains(key);
      if (!known && unknown_seen_.size() < max_unknown_names) fresh = unknown_seen_.insert(key).second;
    }
    if (family) family->Add({{"api", std::string(api)}, {"field", known || fresh ? name : "(other)"}}).Increment();
    if (fresh)
      std::fprintf(stderr, "troupe: warning: %s requests carry the field '%s', which troupe does not know; accepted "
                           "and ignored (server.unknown_fields = \"refuse\" refuses it)\n", std::string(api).c_str(), name.c_str());
  }
  const auto& first = fields.front();
  if (options_.refuse_unknown_fields)
    return api::api_error{400, "unknown parameter " + first + " (server.unknown_fields is \"refuse\")",
                          "invalid_request_error", first, "unknown_parameter"};
  headers.emplace_back("troupe-unknown-fields", std::move(header));
  return std::nullopt;
}

auto gateway::served() -> std::shared_ptr<const fleet> {
  std::lock_guard lock(mutex_);
  return fleet_;
}

auto gateway::readiness(const fleet* f, const served_model* model) const -> std::string {
  if (status_.draining.load()) return "draining";
  if (!status_.ready.load() || !f) return "loading";
  if (model ? !model->ready() : !std::all_of(f->models.begin(), f->models.end(), [](const auto& m) { return m.ready(); }))
    return "no replica ready";
  if (status_.num_queued.load() > 0) {
    const auto last = std::chrono::nanoseconds(status_.last_progress_ns.load());
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    if (now - last > options_.stall_timeout) return "stalled";
  }
  return {};
}

namespace {

/// A completion's body, parsed once with the generation defaults of the
/// model it names, and that model (a capability route's small one first).
struct resolved_call {
  api::generation_request body;
  const served_model* model = nullptr;
  const capability_route* route = nullptr;
  std::string model_name;
};

auto parse_body(const gateway::completion_call& call, const sampling_params& defaults)
    -> std::variant<api::generation_request, api::api_error> {
  return call.protocol->parse(call.body, defaults);
}

auto unknown_model(const fleet& fl, const std::string& name) -> api::api_error {
  std::string known;
  for (const auto& m : fl.models) known += (known.empty() ? "'" : ", '") + m.name + "'";
  for (const auto& r : fl.routes) known += ", '" + r.name + "'";
  return {400, "the model '" + name + "' does not exist; this server serves " + known, "invalid_request_error",
          "model", "model_not_found"};
}

// The model named (a served one, a capability route's small one, or none
// for a name served nowhere); "" names the default.
void resolve_model(const fleet& fl, const std::string& name, resolved_call& out) {
  out.model = &fl.models.front();
  out.route = nullptr;
  out.model_name = name.empty() ? out.model->name : name;
  if (name.empty()) return;
  out.model = fl.find(name);
  if (!out.model && (out.route = fl.find_route(name))) out.model = out.route->small; // (decided once encoded)
}

// The body parsed once, with the generation defaults of the model it names.
// Only where served models' defaults differ is the name read first, by a
// scan (a server of one model, or of models alike, pays nothing for it). A
// name served nowhere: the body's own errors first, then 400.
auto resolve_call(const gateway::completion_call& call, const fleet& fl)
    -> std::variant<resolved_call, api::api_error> {
  const auto& front = fl.models.front().stable->defaults;
  const bool alike = std::all_of(fl.models.begin(), fl.models.end(),
                                 [&](const served_model& m) { return m.stable->defaults == front; });
  resolved_call out;
  const auto named = alike ? std::string() : api::json_reader::peek_model(call.body).value_or("");
  resolve_model(fl, named, out);
  const auto& used = out.model ? out.model->stable->defaults : front;
  auto parsed = parse_body(call, used);
  if (auto* e = std::get_if<api::api_error>(&parsed)) return *e;
  out.body = std::move(std::get<api::generation_request>(parsed));
  if (out.body.model != named) { // (not scanned, or the scan read another "model" than the parser)
    resolve_model(fl, out.body.model, out);
    if (out.model && !(out.model->stable->defaults == used)) {
      parsed = parse_body(call, out.model->stable->defaults);
      if (auto* e = std::get_if<api::api_error>(&parsed)) return *e;
      out.body = std::move(std::get<api::generation_request>(parsed));
    }
  }
  if (!out.model) return unknown_model(fl, out.model_name);
  return out;
}

// A Responses request: its id, the conversation it continues, and where it is kept.
auto open_responses(api::generation_request& body, api::responses::responses_fields& rf, const std::string& owner,
                    response_store& store, std::size_t store_bytes, sink_request& sr) -> std::optional<api::api_error> {
  rf.id = store.new_id();
  if (!rf.previous_response_id.empty()) {
    const auto previous = store.get(owner, rf.previous_response_id, steady_now_s());
    if (!previous)
      return api::api_error{404,
                            store_bytes == 0
                                ? "previous_response_id: no responses are stored here (server.responses_store is 0)"
                                : "previous response with id '" + rf.previous_response_id + "' not found",
                            "invalid_request_error", "previous_response_id", "previous_response_not_found"};
    const auto at = body.messages.begin() + (rf.has_instructions ? 1 : 0);
    body.messages.insert(at, previous->conversation.begin(), previous->conversation.end());
  }
  if (rf.store && store_bytes > 0) {
    sr.responses = &store;
    sr.store_tenant = owner;
    sr.conversation.assign(body.messages.begin() + (rf.has_instructions ? 1 : 0), body.messages.end());
  }
  return std::nullopt;
}

// The session key, the version (sticky per session: a canary takes its
// share of sessions), a capability route's models, the response cache's key.
auto place_call(sink_request& sr, const resolved_call& rc, const gateway::completion_call& call,
                std::shared_ptr<const fleet> fl, http::header_list& headers) -> std::shared_ptr<serving_context> {
  // The session key: x-session-id, else the OpenAI user, else the
  // conversation's opening (request_keys.hpp).
  sr.has_session = true;
  sr.session = api::session_key(sr.body, call.session);
  auto ctx = rc.model->pick(sr.session);
  std::erase_if(headers, [](const auto& h) { return h.first == "x-model-version"; });
  if (rc.route) {
    sr.capability = rc.route;
    sr.route = static_cast<const capability_split&>(*rc.route);
    sr.served = std::move(fl);
    sr.tier = call.tier;
    sr.cache = nullptr; // (which model answers is decided later)
  } else {
    headers.emplace_back("x-model-version", ctx->model_version);
  }
  if (sr.cache) {
    const auto canonical = api::canonical_request(sr.body, ctx->model_version);
    if (canonical.empty())
      sr.cache = nullptr;
    else
      sr.cache_key = response_cache::key(sr.tenant, canonical);
  }
  return ctx;
}

} // namespace

// The tenant's checks, before any model work: its model (403), its
// max_tokens (400), then its place and its rate limits (429).
auto gateway::admit_tenant(const completion_call& call, const std::string& model_name, api::generation_request& body,
                           sink_request& sr, http::header_list& headers) -> std::optional<api::api_error> {
  const auto spec = call.tenant->spec();
  auto d = tenants_->admit(call.tenant, model_name, steady_now_s(), body.max_tokens);
  for (auto& h : d.headers) headers.push_back(std::move(h));
  if (d.status != 0) {
    count_rejection(spec->name, d.reason);
    return api::api_error{d.status, d.message, d.type, d.param, d.code};
  }
  if (!body.max_tokens && spec->max_output_tokens > 0) body.max_tokens = spec->max_output_tokens;
  sr.ticket = std::move(d.ticket);
  sr.tenant = spec->name;
  sr.cache_namespace = hash_of("ns:" + spec->cache_namespace);
  sr.account = hash_of("tenant:" + spec->name);
  sr.weight = spec->tier.vtc_weight;
  sr.priority = spec->tier.priority;
  sr.max_input_tokens = spec->max_input_tokens;
  if (spec->response_cache) sr.cache = cache_.get(); // (its key once the version is known)
  return std::nullopt;
}

void gateway::complete(completion_call& call, const std::shared_ptr<http::exchange>& client) {
  const auto fl = served();
  if (!fl || !status_.ready.load()) {
    api::api_error e{503, "the model is loading", "service_unavailable", "", ""};
    return client->respond(503, call.headers, api::error_body(e));
  }
  auto headers = call.headers;
  const auto fail = [&](const api::api_error& e) {
    auto h = headers;
    h.emplace_back("Content-Type", "application/json");
    client->respond(e.status, std::move(h),
                    call.protocol->error_body(e));
  };
  auto resolved = resolve_call(call, *fl);
  if (auto* e = std::get_if<api::api_error>(&resolved)) return fail(*e);
  auto& rc = std::get<resolved_call>(resolved);
  auto& body = rc.body;
  if (auto e = check_unknown_fields(call.protocol->name(), body.unknown_fields, headers)) return fail(*e);
  if (!body.skipped_tools.empty()) { // hosted tools: not offered to the model (docs/api.md)
    std::string names;
    for (const auto& t : body.skipped_tools) names += (names.empty() ? "" : ", ") + header_safe(t);
    headers.emplace_back("troupe-skipped-tools", std::move(names));
  }
  sink_request sr;
  if (call.responses)
    if (auto e = open_responses(body, call.responses->fields(), call.tenant ? call.tenant->spec()->name : std::string(), *responses_,
                                options_.responses_store_bytes, sr))
      return fail(*e);
  if (call.tenant)
    if (auto e = admit_tenant(call, rc.model_name, body, sr, headers)) return fail(*e);
  // (Each tenant's key of its own: sealed reasoning does not cross tenants.)
  sr.seal = std::make_shared<const api::reasoning_seal>(options_.seal->derive(sr.tenant));
  open_sealed(*sr.seal, body.messages);
  sr.body = std::move(body);
  sr.request_id = call.request_id;
  sr.arrival = call.arrival;
  auto ctx = place_call(sr, rc, call, fl, headers);
  sr.headers = std::move(headers);
  sr.protocol = call.protocol;
  spawn_sink(sys_, std::move(ctx), &status_, client, std::move(sr));
}

// POST /v1/messages/count_tokens: a Messages body's prompt, as the model's
// template renders it (tools, thinking, context edits), counted on one of
// its tokenizers: {"input_tokens": n}.
void gateway::count_tokens(std::string_view body, const std::string& tenant, const fleet& fl,
                           const std::shared_ptr<http::exchange>& client, const http::header_list& headers) {
  const auto respond = [client, headers](int status, std::string json) {
    auto h = headers;
    h.emplace_back("Content-Type", "application/json");
    client->respond(status, std::move(h), std::move(json));
  };
  const auto fail = [respond](const api::api_error& e) { respond(e.status, api::anthropic::error_body(e)); };
  auto parsed = api::anthropic::parse_request(body, {}, nullptr, true);
  if (auto* e = std::get_if<api::api_error>(&parsed)) return fail(*e);
  auto& r = std::get<api::generation_request>(parsed);
  const auto* model = r.model.empty() ? &fl.models.front() : fl.find(r.model);
  if (!model) model = &fl.models.front(); // (Claude Code names Claude models: the default model counts)
  std::shared_ptr<serving_context> ctx = model->stable;
  encode_job job;
  job.chat = true;
  open_sealed(options_.seal->derive(tenant), r.messages);
  job.messages = std::move(r.messages);
  if (r.choice.what != api::tool_choice::mode::none) job.tools_json = std::move(r.tools_json);
  job.template_kwargs_json = std::move(r.template_kwargs_json);
  job.edits = r.edits;
  const auto& tokenizer = ctx->pick_tokenizer(job.num_bytes());
  sys_.spawn([tokenizer, job = std::move(job), respond, fail](caf::event_based_actor* self) mutable {
    self->request(tokenizer, caf::infinite, encode_atom_v, std::move(job))
        .then(
            [respond, fail](encoded& e) {
              if (!e.error.empty()) return fail({400, e.error, "invalid_request_error", "messages", "invalid_value"});
              std::string out = R"({"input_tokens":)" + std::to_string(e.num_tokens());
              if (!e.applied_edits.empty())
                out += R"(,"context_management":)" + api::anthropic::applied_edits_json(e.applied_edits);
              respond(200, out + "}");
            },
            [fail](caf::error&) { fail({503, "the server is shutting down", "service_unavailable", "", "server_shutdown"}); });
  });
}

// POST /tokenize (the prompt, or the messages through the model's template,
// on one of its tokenizers, as a completion's are) and POST /detokenize.
void gateway::tokens(bool tokenize, std::string_view body, const fleet& fl,
                     const std::shared_ptr<http::exchange>& client, const http::header_list& headers) {
  const auto respond = [client, headers](int status, std::string json) {
    auto h = headers;
    h.emplace_back("Content-Type", "application/json");
    client->respond(status, std::move(h), std::move(json));
  };
  const auto fail = [respond](const api::api_error& e) { respond(e.status, api::error_body(e)); };
  const auto model_of = [&](const std::string& name) -> const served_model* {
    if (name.empty()) return &fl.models.front();
    return fl.find(name);
  };
  const auto unknown_model = [&](const std::string& name) {
    std::string known;
    for (const auto& m : fl.models) known += (known.empty() ? "'" : ", '") + m.name + "'";
    const auto why = fl.find_route(name) ? " is a capability route, which has no tokenizer of its own; name one of "
                                         : " does not exist; this server serves ";
    fail({400, "the model '" + name + "'" + why + known, "invalid_request_error", "model", "model_not_found"});
  };
  if (!tokenize) {
    auto parsed = api::parse_detokenize(body);
    if (auto* e = std::get_if<api::api_error>(&parsed)) return fail(*e);
    auto& r = std::get<api::detokenize_request>(parsed);
    const auto* model = model_of(r.model);
    if (!model) return unknown_model(r.model);
    const auto& tok = *model->stable->tok;
    for (std::size_t i = 0; i < r.tokens.size(); ++i)
      if (r.tokens[i] >= tok.vocab_size())
        return fail({400, "tokens[" + std::to_string(i) + "] is " + std::to_string(r.tokens[i]) +
                              ", outside the vocabulary: ids are between 0 and " + std::to_string(tok.vocab_size() - 1),
                     "invalid_request_error", "tokens", "invalid_value"});
    return respond(200, api::detokenize_response(tok.decode(r.tokens)));
  }
  auto parsed = api::parse_tokenize(body);
  if (auto* e = std::get_if<api::api_error>(&parsed)) return fail(*e);
  auto& r = std::get<api::tokenize_request>(parsed);
  const auto* model = model_of(r.model);
  if (!model) return unknown_model(r.model);
  std::shared_ptr<serving_context> ctx = model->stable;
  encode_job job;
  job.chat = r.chat;
  job.text = std::move(r.prompt);
  job.messages = std::move(r.messages);
  job.add_special_tokens = r.add_special_tokens;
  job.add_generation_prompt = r.add_generation_prompt;
  job.tools_json = std::move(r.tools_json);
  job.template_kwargs_json = std::move(r.template_kwargs_json);
  const auto& tokenizer = ctx->pick_tokenizer(job.num_bytes());
  // The answer comes on an actor of its own: this HTTP thread does not wait.
  sys_.spawn([tokenizer, job = std::move(job), ctx, strs = r.return_token_strs, respond,
              fail](caf::event_based_actor* self) mutable {
    self->request(tokenizer, caf::infinite, encode_atom_v, std::move(job))
        .then(
            [ctx, strs, respond, fail](encoded& e) {
              if (!e.error.empty()) return fail({400, e.error, "invalid_request_error", "messages", "invalid_value"});
              std::vector<std::string> pieces;
              if (strs)
                for (const token_id t : e.tokens) pieces.emplace_back(ctx->tok->piece(t));
              respond(200, api::tokenize_response(e.tokens, ctx->max_model_len, strs ? &pieces : nullptr));
            },
            [fail](caf::error&) {
              fail({503, "the server is shutting down", "service_unavailable", "", "server_shutdown"});
            });
  });
}

} // namespace troupe
