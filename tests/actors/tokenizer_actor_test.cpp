// One tokenizer of the pool, real (a SentencePiece model and the built-in
// ChatML template): a prompt is encoded as the tokenizer encodes it (BOS
// first); chat messages are rendered by the template, then encoded; prompt
// ids outside the vocabulary, a chat without a template, and a template the
// request's tools break are errors for the client, never the actor's end;
// a prompt far past its limit is counted, not encoded (at_least).

#include "actors/tokenizer_actor.hpp"
#include "actors/wire.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

using namespace troupe;

namespace {

struct pool_rig {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<const tokenizer> tok{&testing::test_tokenizer(), [](const tokenizer*) {}};
  tokenizer_actor with_template, without;

  pool_rig() {
    add_wire_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    auto chatml = std::make_shared<const chat_template>(
        make_chat_template(builtin_chat_template(chat_format::chatml), "chatml"));
    with_template = spawn_tokenizer(*sys, tok, chatml, nullptr);
    without = spawn_tokenizer(*sys, tok, nullptr, nullptr);
  }
  ~pool_rig() {
    caf::anon_send_exit(with_template, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(without, caf::exit_reason::user_shutdown);
    sys->await_all_actors_done();
  }
  auto encode(const tokenizer_actor& t, encode_job job) -> encoded {
    encoded out;
    caf::scoped_actor self{*sys};
    self->request(t, caf::infinite, encode_atom_v, std::move(job))
        .receive([&](encoded& e) { out = std::move(e); }, [&](caf::error& e) { out.error = "actor: " + to_string(e); });
    return out;
  }
};

} // namespace

TEST_CASE("a prompt is encoded as the tokenizer encodes it") {
  pool_rig rig;
  encode_job job;
  job.text = "Permission is hereby granted, free of charge";
  const auto e = rig.encode(rig.with_template, job);
  CHECK(e.error.empty());
  CHECK(e.tokens == rig.tok->encode(job.text, true));
}

TEST_CASE("chat messages are rendered by the template, then encoded") {
  pool_rig rig;
  encode_job job;
  job.chat = true;
  job.messages = {{"user", "hello there"}};
  const auto e = rig.encode(rig.with_template, job);
  CHECK(e.error.empty());
  const auto text = rig.tok->decode(e.tokens);
  CHECK(text.find("hello there") != std::string::npos);
  CHECK(text.find("assistant") != std::string::npos); // (the generation prompt)
}

TEST_CASE("what a request gets wrong is its error, and the actor answers the next") {
  pool_rig rig;
  encode_job ids;
  ids.prompt_tokens = {5, 999999};
  CHECK(rig.encode(rig.with_template, ids).error.find("outside the vocabulary") != std::string::npos);
  encode_job chat;
  chat.chat = true;
  chat.messages = {{"user", "hi"}};
  CHECK(rig.encode(rig.without, chat).error.find("no chat template") != std::string::npos);
  chat.tools_json = "[not json";
  CHECK_FALSE(rig.encode(rig.with_template, chat).error.empty());
  encode_job fine;
  fine.text = "still here";
  CHECK(rig.encode(rig.with_template, fine).error.empty());
}

TEST_CASE("a prompt far past its limit is counted, not encoded") {
  pool_rig rig;
  encode_job job;
  for (int i = 0; i < 40000; ++i) job.text += "word "; // (200 KB: past the pieces it is counted in)
  job.max_tokens = 100;
  const auto e = rig.encode(rig.with_template, job);
  CHECK(e.error.empty());
  CHECK(e.tokens.empty());
  CHECK(e.at_least > 100);
  CHECK(e.num_tokens() == e.at_least);
}
