// A request's session driven by scripted events, as the sink actor drives
// it: every phase (received, encoding, routing, admitting, streaming,
// finished, failed) and every way a request fails, each checked by the
// effects it returns. The bodies are parsed by the real parsers and the
// text decoded by a real SentencePiece tokenizer; the JSON the client would
// get is read back with simdjson.

#include "service/request/session.hpp"

#include "service/http/openai/openai_api.hpp"
#include "service/http/openai/openai_protocol.hpp"

#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <chrono>
#include <string>
#include <vector>

using namespace troupe;
using phase = request_session::phase;
using what = effect::observe::what;

namespace {

auto profile(std::int32_t max_model_len = 64) -> std::shared_ptr<model_profile> {
  auto p = std::make_shared<model_profile>();
  p->tok = std::shared_ptr<const tokenizer>(&testing::test_tokenizer(), [](const tokenizer*) {});
  p->model_name = "tiny";
  p->model_version = "tiny@1";
  p->max_model_len = max_model_len;
  p->eos_ids = {2};
  p->max_retries = 1;
  return p;
}

auto body(api::endpoint kind, std::string_view json) -> api::generation_request {
  auto parsed = api::parse_request(kind, json, sampling_params{});
  REQUIRE(std::holds_alternative<api::generation_request>(parsed));
  return std::get<api::generation_request>(std::move(parsed));
}

const steady_time t0{std::chrono::seconds(1000)};
auto at(int ms) -> steady_time { return t0 + std::chrono::milliseconds(ms); }

/// A session with ids from 10 on (two at a time for n = 2).
struct scripted {
  std::shared_ptr<model_profile> model = profile();
  request_id next = 10;
  std::atomic<bool> stopping{false};
  std::optional<request_session> s;

  explicit scripted(api::generation_request b, std::shared_ptr<model_profile> m = profile()) : model(std::move(m)) {
    session_request req;
    req.body = std::move(b);
    req.protocol = std::make_shared<api::openai_protocol>(req.body.kind);
    req.request_id = "r1";
    req.arrival = t0;
    req.created = 1700000000;
    s.emplace(model, std::move(req), [this](std::int32_t n) { return std::exchange(next, next + n); }, &stopping);
  }
};

template <class E> auto find(const effects& fx) -> const E* {
  for (const auto& e : fx)
    if (const auto* x = std::get_if<E>(&e)) return x;
  return nullptr;
}
template <class E> auto count(const effects& fx) -> int {
  int n = 0;
  for (const auto& e : fx) n += std::holds_alternative<E>(e) ? 1 : 0;
  return n;
}
auto observed(const effects& fx, what kind) -> bool {
  for (const auto& e : fx)
    if (const auto* o = std::get_if<effect::observe>(&e); o && o->kind == kind) return true;
  return false;
}

auto encoded_of(const tokenizer& tok, const std::string& text) -> encoded {
  encoded e;
  e.tokens = tok.encode(text, true);
  return e;
}

auto token(request_id id, token_id t, finish_reason f = finish_reason::none) -> request_update {
  request_update u;
  u.id = id;
  u.token = sample_result{t, -0.5f, {}, {}};
  u.finished = f;
  return u;
}

/// The session from its start through its dispatch (the first choice's
/// submission, returned) to replica `replica`.
auto to_admitting(scripted& x, const std::string& prompt, std::int32_t replica = 0) -> request {
  auto fx = x.s->start(at(0));
  REQUIRE(find<effect::encode>(fx));
  CHECK(x.s->current_phase() == phase::encoding);
  auto e = encoded_of(*x.model->tok, prompt);
  fx = x.s->on_encoded(e, at(1));
  REQUIRE(find<effect::dispatch>(fx));
  CHECK(x.s->current_phase() == phase::routing);
  auto r = find<effect::dispatch>(fx)->r;
  CHECK(x.s->on_routed(replica, at(2)).empty());
  CHECK(x.s->current_phase() == phase::admitting);
  return r;
}

auto json_field(const std::string& json, const char* pointer) -> std::string {
  simdjson::dom::parser p;
  auto doc = p.parse(json);
  REQUIRE(doc.error() == simdjson::SUCCESS);
  auto v = doc.value().at_pointer(pointer);
  if (v.error()) return "<absent>";
  if (v.is_string()) return std::string(std::string_view(v.get_string().value()));
  return simdjson::minify(v.value());
}

} // namespace

TEST_CASE("a completion: encoded, dispatched, admitted, its tokens, one whole response") {
  scripted x(body(api::endpoint::completions, R"({"prompt":"Permission is","max_tokens":3})"));
  CHECK(x.s->current_phase() == phase::received);
  auto fx = x.s->start(at(0));
  const auto* enc = find<effect::encode>(fx);
  REQUIRE(enc);
  CHECK_FALSE(enc->job.chat);
  CHECK(enc->job.text == "Permission is");
  CHECK(enc->job.max_tokens == 63); // (below the context)
  auto e = encoded_of(*x.model->tok, "Permission is");
  const auto n = static_cast<std::int64_t>(e.tokens.size());
  fx = x.s->on_encoded(e, at(1));
  const auto* d = find<effect::dispatch>(fx);
  REQUIRE(d);
  CHECK(d->probe);
  CHECK(d->avoid.empty());
  CHECK(d->route.prompt_tokens == n);
  CHECK(d->route.max_tokens == 3);
  CHECK(d->r.id == 10); // (the dispatch is the first choice's submission)
  CHECK(d->r.choice == 0);
  CHECK(d->r.sampling.max_tokens == 3);
  CHECK(x.s->on_routed(2, at(2)).empty());
  CHECK(x.s->on_admitted(7, 0, admission{}, at(3)).empty()); // (not its replica)
  fx = x.s->on_admitted(2, 0, admission{}, at(3));
  CHECK(fx.empty()); // (not streamed: nothing goes out yet)
  CHECK(x.s->current_phase() == phase::streaming);
  const auto& tok = *x.model->tok;
  const auto ids = tok.encode(" hereby granted", false);
  REQUIRE(ids.size() >= 2);
  fx = x.s->on_tokens(token(10, ids[0]), at(5));
  CHECK(observed(fx, what::ttft));
  CHECK(count<effect::write>(fx) == 0);
  fx = x.s->on_tokens(token(10, ids[1], finish_reason::length), at(7));
  CHECK(observed(fx, what::itl));
  CHECK(observed(fx, what::e2e));
  CHECK(observed(fx, what::tpot));
  const auto* r = find<effect::respond>(fx);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(json_field(r->body, "/object") == "text_completion");
  CHECK(json_field(r->body, "/choices/0/finish_reason") == "length");
  CHECK(json_field(r->body, "/usage/prompt_tokens") == std::to_string(n));
  CHECK(json_field(r->body, "/usage/completion_tokens") == "2");
  // (A completion's text keeps the space SentencePiece's decode drops first.)
  CHECK(json_field(r->body, "/choices/0/text") == " " + tok.decode(std::vector<token_id>{ids[0], ids[1]}));
  bool has_replica_header = false;
  for (const auto& [k, v] : r->headers) has_replica_header |= k == "x-troupe-replica" && v == "2";
  CHECK(has_replica_header);
  CHECK(std::holds_alternative<effect::quit>(fx.back()));
  CHECK(x.s->current_phase() == phase::finished);
  CHECK(x.s->on_tokens(token(10, ids[0]), at(8)).empty()); // (late tokens: nothing)
}

TEST_CASE("a streamed chat: the 200 and its head once admitted, a write per token, the end") {
  scripted x(body(api::endpoint::chat, R"({"messages":[{"role":"user","content":"hi"}],"stream":true})"));
  const auto sub = to_admitting(x, "hi");
  CHECK(sub.sampling.max_tokens == 64 - static_cast<std::int32_t>(x.model->tok->encode("hi", true).size()));
  auto fx = x.s->on_admitted(0, 0, admission{}, at(3));
  const auto* head = find<effect::start_stream>(fx);
  REQUIRE(head);
  bool sse = false;
  for (const auto& [k, v] : head->headers) sse |= k == "Content-Type" && v == "text/event-stream";
  CHECK(sse);
  REQUIRE(find<effect::write>(fx)); // the role chunk
  CHECK(find<effect::write>(fx)->text.find("\"role\":\"assistant\"") != std::string::npos);
  const auto ids = x.model->tok->encode(" free", false);
  fx = x.s->on_tokens(token(10, ids[0]), at(4));
  REQUIRE(count<effect::write>(fx) == 1);
  CHECK(find<effect::write>(fx)->text.rfind("data: ", 0) == 0);
  fx = x.s->on_tokens(token(10, 2, finish_reason::stop), at(5)); // EOS
  REQUIRE(find<effect::write>(fx));
  CHECK(find<effect::write>(fx)->text.find("[DONE]") != std::string::npos);
  CHECK(find<effect::end_stream>(fx));
  CHECK(std::holds_alternative<effect::quit>(fx.back()));
}

TEST_CASE("refusals before and after encoding: the API's 400, once, and the end") {
  SUBCASE("the tokenizer's error names the prompt") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"));
    x.s->start(at(0));
    encoded e;
    e.error = "token 99999 is outside the vocabulary";
    const auto fx = x.s->on_encoded(e, at(1));
    REQUIRE(find<effect::respond>(fx));
    CHECK(find<effect::respond>(fx)->status == 400);
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/param") == "prompt");
    CHECK(x.s->current_phase() == phase::failed);
  }
  SUBCASE("a prompt at the model's context") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"), profile(4));
    x.s->start(at(0));
    auto e = encoded_of(*x.model->tok, "Permission is hereby granted, free of charge");
    const auto fx = x.s->on_encoded(e, at(1));
    REQUIRE(find<effect::respond>(fx));
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/message").find("the model's context is 4 tokens") !=
          std::string::npos);
  }
  SUBCASE("a count that stopped says at least") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"), profile(4));
    x.s->start(at(0));
    encoded e;
    e.at_least = 9;
    const auto fx = x.s->on_encoded(e, at(1));
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/message").find("at least 9 tokens") != std::string::npos);
  }
  SUBCASE("logit_bias outside the vocabulary") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x","logit_bias":{"1999999":5}})"));
    x.s->start(at(0));
    auto e = encoded_of(*x.model->tok, "x");
    const auto fx = x.s->on_encoded(e, at(1));
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/param") == "logit_bias");
  }
  SUBCASE("a grammar refused names response_format") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"));
    x.s->start(at(0));
    auto e = encoded_of(*x.model->tok, "x");
    e.grammar_error = "the grammar is bad";
    const auto fx = x.s->on_encoded(e, at(1));
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/param") == "response_format");
  }
  SUBCASE("tools where the model has no tool-call format: refused before encoding") {
    scripted x(body(api::endpoint::chat, R"({"messages":[{"role":"user","content":"hi"}],
      "tools":[{"type":"function","function":{"name":"f"}}]})"));
    const auto fx = x.s->start(at(0));
    CHECK_FALSE(find<effect::encode>(fx));
    REQUIRE(find<effect::respond>(fx));
    CHECK(find<effect::respond>(fx)->status == 400);
    CHECK(x.s->current_phase() == phase::failed);
  }
}

TEST_CASE("no replica, a full queue, the shutdown: 503, 429 with Retry-After, server_shutdown") {
  SUBCASE("no replica ready") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"));
    x.s->start(at(0));
    auto e = encoded_of(*x.model->tok, "x");
    x.s->on_encoded(e, at(1));
    const auto fx = x.s->on_no_replica(at(2));
    REQUIRE(find<effect::respond>(fx));
    CHECK(find<effect::respond>(fx)->status == 503);
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/type") == "service_unavailable");
  }
  SUBCASE("the replica's queue is full") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"));
    to_admitting(x, "x");
    const auto fx = x.s->on_admitted(0, 0, admission{429, "the queue is full"}, at(3));
    const auto* r = find<effect::respond>(fx);
    REQUIRE(r);
    CHECK(r->status == 429);
    CHECK(json_field(r->body, "/error/type") == "rate_limit_error");
    bool retry_after = false;
    for (const auto& [k, v] : r->headers) retry_after |= k == "Retry-After";
    CHECK(retry_after);
  }
  SUBCASE("an actor it asked is gone") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"));
    x.s->start(at(0));
    const auto fx = x.s->on_shutdown(at(1));
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/code") == "server_shutdown");
  }
  SUBCASE("its replica stopped past the drain timeout") {
    scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"));
    to_admitting(x, "x");
    x.stopping = true;
    const auto fx = x.s->on_replica_failed(0, at(3));
    CHECK(json_field(find<effect::respond>(fx)->body, "/error/message").find("drain_timeout_s") != std::string::npos);
  }
}

TEST_CASE("a replica that fails before the first token: another, new ids; then the retries run out") {
  scripted x(body(api::endpoint::completions, R"({"prompt":"x","max_tokens":2})"));
  to_admitting(x, "x", 0);
  x.s->on_admitted(0, 0, admission{}, at(3));
  CHECK(x.s->on_replica_failed(5, at(4)).empty()); // (not its replica)
  auto fx = x.s->on_replica_failed(0, at(4));
  CHECK(observed(fx, what::retry));
  const auto* d = find<effect::dispatch>(fx);
  REQUIRE(d);
  CHECK_FALSE(d->probe);
  CHECK(d->avoid == std::vector<std::int32_t>{0});
  CHECK(d->r.id == 11);
  CHECK(x.s->first_id() == 11);
  CHECK(x.s->current_phase() == phase::routing);
  CHECK(x.s->on_tokens(token(10, 5), at(5)).empty()); // (the failed replica's late token)
  CHECK(x.s->on_routed(1, at(6)).empty());
  x.s->on_admitted(1, 0, admission{}, at(7));
  // An error update is its replica failing too: max_retries (1) is spent.
  request_update err;
  err.id = 11;
  err.finished = finish_reason::error;
  fx = x.s->on_tokens(err, at(8));
  CHECK(observed(fx, what::failure));
  REQUIRE(find<effect::respond>(fx));
  CHECK(find<effect::respond>(fx)->status == 503);
  CHECK(json_field(find<effect::respond>(fx)->body, "/error/code") == "replica_failed");
  bool moved = false;
  for (const auto& [k, v] : find<effect::respond>(fx)->headers) moved |= k == "x-troupe-replica" && v == "1";
  CHECK(moved);
}

TEST_CASE("a stream whose replica fails mid-stream ends with an error event") {
  scripted x(body(api::endpoint::completions, R"({"prompt":"x","stream":true})"));
  to_admitting(x, "x");
  x.s->on_admitted(0, 0, admission{}, at(3));
  x.s->on_tokens(token(10, x.model->tok->encode(" free", false)[0]), at(4));
  const auto fx = x.s->on_replica_failed(0, at(5));
  REQUIRE(find<effect::write>(fx));
  CHECK(find<effect::write>(fx)->text.find("mid-stream") != std::string::npos);
  CHECK(find<effect::end_stream>(fx));
  CHECK_FALSE(find<effect::respond>(fx));
  CHECK(x.s->current_phase() == phase::failed);
}

TEST_CASE("the client goes: the session ends, an admitted request counted as aborted") {
  scripted x(body(api::endpoint::completions, R"({"prompt":"x"})"));
  to_admitting(x, "x");
  x.s->on_admitted(0, 0, admission{}, at(3));
  const auto fx = x.s->on_client_gone(at(4));
  CHECK(observed(fx, what::success));
  CHECK(find<effect::observe>(fx)->reason == finish_reason::abort);
  CHECK(std::holds_alternative<effect::quit>(fx.back()));
  CHECK(x.s->on_client_gone(at(5)).empty());
}

TEST_CASE("n = 2: a choice group, the second submitted once the first is queued, one answer of both") {
  scripted x(body(api::endpoint::completions, R"({"prompt":"x","n":2,"max_tokens":1})"));
  CHECK(x.s->num_choices() == 2);
  const auto first = to_admitting(x, "x");
  CHECK(first.group != 0);
  auto fx = x.s->on_admitted(0, 0, admission{}, at(3));
  const auto* second = find<effect::submit>(fx);
  REQUIRE(second);
  CHECK(second->r.id == 11);
  CHECK(second->r.choice == 1);
  CHECK(second->r.group == first.group);
  const auto ids = x.model->tok->encode(" free", false);
  fx = x.s->on_tokens(token(11, ids[0], finish_reason::length), at(4));
  REQUIRE(find<effect::abort>(fx)); // (its request ends at the replica)
  CHECK(find<effect::abort>(fx)->id == 11);
  CHECK_FALSE(find<effect::respond>(fx));
  fx = x.s->on_tokens(token(10, ids[0], finish_reason::length), at(5));
  const auto* r = find<effect::respond>(fx);
  REQUIRE(r);
  CHECK(json_field(r->body, "/choices/1/index") == "1");
  CHECK(json_field(r->body, "/usage/completion_tokens") == "2");
}

TEST_CASE("a capability route: the small model's encoding decides; the large one encodes again") {
  auto b = body(api::endpoint::completions, R"({"prompt":"x","max_tokens":4})");
  session_request req;
  req.body = std::move(b);
  req.protocol = std::make_shared<api::openai_protocol>(req.body.kind);
  req.arrival = t0;
  req.route = capability_split{2, 8, {}};
  auto small = profile(), large = profile(128);
  large->model_version = "big@1";
  request_id next = 1;
  request_session s(small, std::move(req), [&](std::int32_t n) { return std::exchange(next, next + n); });
  s.start(at(0));
  auto e = encoded_of(*small->tok, "Permission is hereby granted"); // (over 2 tokens: large)
  auto fx = s.on_encoded(e, at(1));
  REQUIRE(find<effect::choose_model>(fx));
  CHECK_FALSE(find<effect::choose_model>(fx)->small);
  fx = s.on_model(large, at(2));
  REQUIRE(find<effect::encode>(fx));
  CHECK(find<effect::encode>(fx)->job.max_tokens == 127);
  CHECK(s.first_id() == 2);
  auto again = encoded_of(*large->tok, "Permission is hereby granted");
  fx = s.on_encoded(again, at(3)); // (decided once: no second choice)
  REQUIRE(find<effect::dispatch>(fx));
  CHECK(&s.model() == large.get());
}

TEST_CASE("a response cache hit is answered whole, before any dispatch") {
  response_cache cache(1 << 20, 60);
  const auto key = response_cache::key("default", "canonical");
  cache.put(key, {{"Hello", " world"}, static_cast<std::uint8_t>(finish_reason::stop), 3, 2},
            std::chrono::duration<double>(t0.time_since_epoch()).count());
  session_request req;
  req.body = body(api::endpoint::completions, R"({"prompt":"x","temperature":0})");
  req.protocol = std::make_shared<api::openai_protocol>(req.body.kind);
  req.arrival = t0;
  req.cache = &cache;
  req.cache_key = key;
  request_id next = 1;
  request_session s(profile(), std::move(req), [&](std::int32_t n) { return std::exchange(next, next + n); });
  const auto fx = s.start(at(1));
  CHECK(observed(fx, what::cache_hit));
  CHECK_FALSE(find<effect::encode>(fx));
  CHECK_FALSE(find<effect::dispatch>(fx));
  REQUIRE(find<effect::respond>(fx));
  CHECK(json_field(find<effect::respond>(fx)->body, "/choices/0/text") == "Hello world");
  CHECK(json_field(find<effect::respond>(fx)->body, "/usage/prompt_tokens") == "3");
}

TEST_CASE("echo with logprobs where the replica sent no prompt scores: 400 naming echo") {
  scripted x(body(api::endpoint::completions, R"({"prompt":"Permission is","echo":true,"logprobs":1})"));
  to_admitting(x, "Permission is");
  x.s->on_admitted(0, 0, admission{}, at(3));
  const auto fx = x.s->on_tokens(token(10, 5), at(4));
  CHECK(observed(fx, what::ttft));
  REQUIRE(find<effect::respond>(fx));
  CHECK(json_field(find<effect::respond>(fx)->body, "/error/param") == "echo");
}
