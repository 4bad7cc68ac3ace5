// The gateway behind a real HTTP server on loopback, over the real serving
// actors (a tokenizer, the router, a replica over a zero executor), asked
// by a plain HTTP/1.1 client: the route table's answers (a whole chat
// completion, a streamed completion ending in [DONE], the models list,
// health), and its errors, each in its protocol's shape: a model still
// loading (503), no such route (404), an unknown model (400), a Messages
// body that is not JSON (Anthropic's shape).

#include "actors/gateway.hpp"
#include "tests/actors/serving_fleet.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>
#include <simdjson.h>

#include <string>

using namespace troupe;
using namespace troupe::testing;

namespace {

struct reply {
  int status = 0;
  std::string head, body;
};

/// One request on a connection of its own (Connection: close), read to its end.
auto call(std::uint16_t port, const std::string& method, const std::string& path, const std::string& body = {})
    -> reply {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                              (body.empty() ? std::string() : "Content-Type: application/json\r\n") +
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  reply out;
  const auto split = raw.find("\r\n\r\n");
  REQUIRE(split != std::string::npos);
  out.head = raw.substr(0, split);
  out.body = raw.substr(split + 4);
  out.status = std::stoi(raw.substr(9, 3));
  // (A chunked body: its chunks joined.)
  if (out.head.find("chunked") != std::string::npos) {
    std::string joined;
    for (std::size_t at = 0;;) {
      const auto eol = out.body.find("\r\n", at);
      const auto size = std::stoul(out.body.substr(at, eol - at), nullptr, 16);
      if (size == 0) break;
      joined += out.body.substr(eol + 2, size);
      at = eol + 2 + size + 2;
    }
    out.body = std::move(joined);
  }
  return out;
}

auto field(const std::string& json, std::string_view pointer) -> std::string {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  if (parser.parse(json).get(e) != simdjson::SUCCESS) return "(not JSON)";
  auto at = e.at_pointer(pointer);
  if (at.error()) return "(absent)";
  std::string_view s;
  if (at.get(s) == simdjson::SUCCESS) return std::string(s);
  return simdjson::minify(at.value());
}

auto loopback() -> http::server_options {
  http::server_options o;
  o.port = 0;
  return o;
}

struct gateway_rig : serving_fleet {
  gateway gw;
  http::server srv;

  gateway_rig()
      : serving_fleet(true),
        gw(*sys, status, gateway_options{}),
        srv(loopback(), [this](http::request r, std::shared_ptr<http::exchange> c) {
          gw.handle(std::move(r), std::move(c));
        }) {}
  ~gateway_rig() { srv.stop(); }

  void serve() {
    auto f = std::make_shared<fleet>();
    f->models.push_back({"tiny", ctx, nullptr, 0});
    gw.set_fleet(std::move(f));
    status.ready = true;
  }
};

} // namespace

TEST_CASE("the gateway: loading, then the routes answer through the actors") {
  gateway_rig rig;
  const auto port = rig.srv.port();
  const auto loading = call(port, "POST", "/v1/completions", R"({"prompt":"hi","max_tokens":2})");
  CHECK(loading.status == 503);
  CHECK(field(loading.body, "/error/message") == "the model is loading");

  rig.serve();
  const auto chat = call(port, "POST", "/v1/chat/completions",
                         R"({"messages":[{"role":"user","content":"Permission is"}],"max_tokens":3})");
  CHECK(chat.status == 200);
  CHECK(field(chat.body, "/object") == "chat.completion");
  CHECK(field(chat.body, "/model") == "tiny");
  CHECK(field(chat.body, "/usage/completion_tokens") == "3");
  CHECK(chat.head.find("x-troupe-replica: 0") != std::string::npos);

  const auto stream = call(port, "POST", "/v1/completions", R"({"prompt":"Permission is","max_tokens":2,"stream":true})");
  CHECK(stream.status == 200);
  CHECK(stream.head.find("text/event-stream") != std::string::npos);
  CHECK(stream.body.starts_with("data: {"));
  CHECK(stream.body.ends_with("data: [DONE]\n\n"));

  const auto models = call(port, "GET", "/v1/models");
  CHECK(models.status == 200);
  CHECK(field(models.body, "/data/0/id") == "tiny");
  CHECK(call(port, "GET", "/health/live").status == 200);
  CHECK(call(port, "GET", "/health/ready").status == 200);
}

TEST_CASE("the gateway's errors, each in its protocol's shape") {
  gateway_rig rig;
  rig.serve();
  const auto port = rig.srv.port();
  const auto none = call(port, "GET", "/v1/nothing");
  CHECK(none.status == 404);
  CHECK(field(none.body, "/error/code") == "not_found");
  const auto unknown = call(port, "POST", "/v1/chat/completions",
                            R"({"model":"huge","messages":[{"role":"user","content":"hi"}]})");
  CHECK(unknown.status == 400);
  CHECK(field(unknown.body, "/error/code") == "model_not_found");
  CHECK(field(unknown.body, "/error/param") == "model");
  const auto messages = call(port, "POST", "/v1/messages", "{not json");
  CHECK(messages.status == 400);
  CHECK(field(messages.body, "/type") == "error");
  CHECK(field(messages.body, "/error/type") == "invalid_request_error");
  const auto bad = call(port, "POST", "/v1/completions", R"({"prompt":"hi","temperature":-1})");
  CHECK(bad.status == 400);
  CHECK(field(bad.body, "/error/param") == "temperature");
}
