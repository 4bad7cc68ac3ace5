// A request's sink actor through the real serving actors (a tokenizer of the
// pool, the router, a replica over a zero executor) to a client end that
// records what reaches it: a whole completion with its usage and replica
// header; a streamed chat (its 200, its chunks, [DONE]); a client that
// leaves mid-stream (its request ends at the replica); no replica ready (503).

#include "actors/router_actor.hpp"
#include "actors/sink_actor.hpp"
#include "actors/tokenizer_actor.hpp"
#include "actors/wire.hpp"
#include "service/http/openai/openai_protocol.hpp"
#include "tests/actors/serving_fleet.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <thread>

using namespace troupe;
using namespace troupe::testing;

namespace {

/// The client's end of one exchange: what the sink sent, in order.
struct recording_client final : http::exchange {
  std::mutex mu;
  std::condition_variable cv;
  int status = 0;
  http::header_list headers;
  std::string body;
  bool ended = false;
  std::function<void()> gone;

  void respond(int s, http::header_list h, std::string b) override {
    std::lock_guard lock(mu);
    status = s;
    headers = std::move(h);
    body = std::move(b);
    ended = true;
    cv.notify_all();
  }
  void start_stream(int s, http::header_list h) override {
    std::lock_guard lock(mu);
    status = s;
    headers = std::move(h);
  }
  void write(std::string data, delivery_count delivered) override {
    std::lock_guard lock(mu);
    body += data;
    if (delivered) delivered->fetch_sub(1, std::memory_order_relaxed);
    cv.notify_all();
  }
  void end_stream() override {
    std::lock_guard lock(mu);
    ended = true;
    cv.notify_all();
  }
  void on_disconnect(std::function<void()> f) override { gone = std::move(f); }
  void accept_websocket(std::function<http::websocket_handlers(std::shared_ptr<http::websocket>)>) override {}

  auto wait(const std::function<bool()>& until) -> bool {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), until);
  }
  auto header(std::string_view name) -> std::string {
    std::lock_guard lock(mu);
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

struct serving_rig : testing::serving_fleet {
  using serving_fleet::serving_fleet;

  auto send(api::endpoint kind, std::string_view json) -> std::shared_ptr<recording_client> {
    auto protocol = std::make_shared<api::openai_protocol>(kind);
    auto parsed = protocol->parse(json, sampling_params{});
    REQUIRE(std::holds_alternative<api::generation_request>(parsed));
    sink_request req;
    req.body = std::get<api::generation_request>(std::move(parsed));
    req.protocol = std::move(protocol);
    req.request_id = "t1";
    req.arrival = std::chrono::steady_clock::now();
    req.headers = {{"x-request-id", "t1"}};
    auto client = std::make_shared<recording_client>();
    spawn_sink(*sys, ctx, &status, client, std::move(req));
    return client;
  }
};

} // namespace

TEST_CASE("a completion goes through the actors and comes back whole, with its usage and replica") {
  serving_rig rig(true);
  auto c = rig.send(api::endpoint::completions, R"({"prompt":"Permission is","max_tokens":5})");
  REQUIRE(c->wait([&] { return c->ended; }));
  CHECK(c->status == 200);
  CHECK(c->header("x-troupe-replica") == "0");
  CHECK(c->body.find("\"completion_tokens\":5") != std::string::npos);
  CHECK(c->body.find("\"finish_reason\":\"length\"") != std::string::npos);
}

TEST_CASE("a streamed chat: its 200, its chunks, [DONE]") {
  serving_rig rig(true);
  auto c = rig.send(api::endpoint::chat, R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true})");
  REQUIRE(c->wait([&] { return c->ended; }));
  CHECK(c->status == 200);
  CHECK(c->header("Content-Type") == "text/event-stream");
  CHECK(c->body.find("\"role\":\"assistant\"") != std::string::npos);
  CHECK(c->body.find("data: [DONE]") != std::string::npos);
}

TEST_CASE("a client that leaves mid-stream: its request ends at the replica, and its sink goes") {
  serving_rig rig(true);
  // The replica takes requests but runs no step: the stream opens (the role
  // chunk, at admission) and stalls; then the client goes.
  caf::anon_send(rig.replica, fault_atom_v, std::string("hang"));
  auto c = rig.send(api::endpoint::chat, R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":400,"stream":true})");
  REQUIRE(c->wait([&] { return !c->body.empty(); }));
  CHECK(rig.status.num_queued.load() == 1);
  REQUIRE(c->gone);
  c->gone();
  for (int i = 0; i < 3000 && (rig.status.num_live_requests.load() > 0 || rig.status.num_queued.load() > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(rig.status.num_live_requests.load() == 0); // the sink went
  CHECK(rig.status.num_queued.load() == 0);        // its request ended at the replica (an abort)
  CHECK(c->body.find("[DONE]") == std::string::npos);
}

TEST_CASE("no replica ready: 503") {
  serving_rig rig(false);
  auto c = rig.send(api::endpoint::completions, R"({"prompt":"x","max_tokens":2})");
  REQUIRE(c->wait([&] { return c->ended; }));
  CHECK(c->status == 503);
  CHECK(c->body.find("no replica of the model is ready") != std::string::npos);
}
