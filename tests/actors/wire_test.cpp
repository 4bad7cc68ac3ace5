// What crosses the network to a worker survives the trip: each wire type,
// serialized and read back with CAF's binary serializer, equals the original.

#include "actors/wire.hpp"

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <doctest/doctest.h>

using namespace troupe;

namespace {

template <class T>
auto round_trip(caf::actor_system& sys, T x) -> T {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE(!sink(x));
  T y{};
  caf::binary_deserializer source{sys, buf};
  REQUIRE(!source(y));
  return y;
}

} // namespace

TEST_CASE("wire types round-trip") {
  caf::actor_system_config cfg;
  add_wire_types(cfg);
  caf::actor_system sys{cfg};

  request r;
  r.id = 42;
  r.prompt = {1, 5, 9};
  r.sampling.temperature = 0.5f;
  r.sampling.seed = 7;
  r.sampling.max_tokens = 12;
  r.sampling.stop = {"\n\n"};
  r.sampling.stop_token_ids = {3};
  r.sampling.logprobs = 2;
  r.sampling.prompt_logprobs = 1;
  r.tenant = 99;
  r.priority = -1;
  const auto r2 = round_trip(sys, r);
  CHECK(r2.id == 42);
  CHECK(r2.prompt == r.prompt);
  CHECK(r2.sampling == r.sampling);
  CHECK(r2.tenant == 99);
  CHECK(r2.priority == -1);
  r.sampling.seed.reset();
  CHECK_FALSE(round_trip(sys, r).sampling.seed.has_value());

  request_update u;
  u.id = 42;
  u.token = sample_result{17, -0.25f, {{17, -0.25f}, {4, -2.0f}}, {30, 31}};
  u.finished = finish_reason::length;
  u.prompt_logprobs = {{5, -1.5f, {{6, -0.5f}}, {}}, {9, -3.0f, {}, {}}};
  const auto u2 = round_trip(sys, u);
  REQUIRE(u2.prompt_logprobs.size() == 2);
  CHECK(u2.prompt_logprobs[0].top_logprobs[0].token == 6);
  CHECK(u2.prompt_logprobs[1].logprob == -3.0f);
  CHECK(u2.id == 42);
  REQUIRE(u2.token.has_value());
  CHECK(u2.token->token == 17);
  CHECK(u2.token->top_logprobs.size() == 2);
  CHECK(u2.token->top_logprobs[1].token == 4);
  CHECK(u2.token->forced == std::vector<token_id>{30, 31});
  CHECK(u2.finished == finish_reason::length);
  u.token.reset();
  u.finished = finish_reason::error;
  const auto u3 = round_trip(sys, u);
  CHECK_FALSE(u3.token.has_value());
  CHECK(u3.finished == finish_reason::error);

  const auto a = round_trip(sys, admission{429, "the queue is full"});
  CHECK(a.status == 429);
  CHECK(a.message == "the queue is full");

  replica_report rep;
  rep.running = 3;
  rep.kv_use = 0.5;
  rep.submitted = 11;
  rep.queue_age_s = 1.5;
  const auto rep2 = round_trip(sys, rep);
  CHECK(rep2.running == 3);
  CHECK(rep2.kv_use == 0.5);
  CHECK(rep2.submitted == 11);
  CHECK(rep2.queue_age_s == 1.5);

  // A whole message, as the network layer writes it.
  auto m = caf::make_message(tokens_atom_v, u);
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE(!sink(m));
  caf::message back;
  caf::binary_deserializer source{sys, buf};
  REQUIRE(!source(back));
  CHECK(back.match_elements<tokens_atom, request_update>());
}
