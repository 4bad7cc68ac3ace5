// One request end to end on the tiny built-in model: chunked prefill,
// decode, sampling, streaming text.

#include "engine/cpu/cpu_executor.hpp"
#include "engine/generator.hpp"
#include "engine/model/presets.hpp"
#include "engine/make_model/random_model.hpp"
#include "engine/make_model/tiny_model.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>

using namespace troupe;

namespace {

struct tiny {
  testing::temp_dir dir;
  std::unique_ptr<model_weights> weights;
  std::unique_ptr<tokenizer> tok;
  tiny() {
    make_model("tiny", dir.path(), 1);
    weights = std::make_unique<model_weights>(model_weights::load(dir.path()));
    tok = std::make_unique<tokenizer>(tokenizer::load(dir / "tokenizer.model"));
  }
};

auto shared_tiny() -> tiny& {
  static tiny t;
  return t;
}

/// Random weights with 4 times the rows the tokenizer has pieces (as models
/// pad their vocabulary): most of the mass falls on ids it cannot spell.
struct padded {
  testing::temp_dir dir;
  std::unique_ptr<model_weights> weights;
  std::unique_ptr<tokenizer> tok;
  padded() {
    std::filesystem::copy_file(testing::test_tokenizer_file(), dir / "tokenizer.model");
    tok = std::make_unique<tokenizer>(tokenizer::load(dir / "tokenizer.model"));
    write_random_model(dir.path(), llama_config(4 * tok->vocab_size(), 64, 128, 2, 4, 2), {});
    weights = std::make_unique<model_weights>(model_weights::load(dir.path()));
  }
};

struct outcome {
  std::string text;
  generation_stats stats;
};

auto run(const sampling_params& p, std::int32_t chunk, const std::string& prompt = "Permission is hereby granted")
    -> outcome {
  auto& t = shared_tiny();
  cpu_executor ex(*t.weights, {16, 64, 1, 42});
  generator g(ex, *t.tok, {t.tok->eos_id()}, chunk, 2048);
  outcome o;
  o.stats = g.generate(t.tok->encode(prompt, true), p, [&](std::string_view s) { o.text += s; });
  return o;
}

} // namespace

TEST_CASE("greedy generation is the same whatever the prefill chunk size") {
  sampling_params p;
  p.temperature = 0.0f;
  p.max_tokens = 24;
  p.ignore_eos = true;
  const auto a = run(p, 512);
  CHECK(a.stats.num_generated_tokens == 24);
  CHECK(a.stats.reason == finish_reason::length);
  CHECK(!a.text.empty());
  for (std::int32_t chunk : {1, 3, 7}) {
    CAPTURE(chunk);
    const auto b = run(p, chunk);
    CHECK(b.stats.tokens == a.stats.tokens);
    CHECK(b.text == a.text);
  }
}

TEST_CASE("the streamed text is the decoded tokens") {
  sampling_params p;
  p.temperature = 0.8f;
  p.seed = 5;
  p.max_tokens = 40;
  p.ignore_eos = true;
  const auto o = run(p, 16);
  auto& t = shared_tiny();
  // The output continues a prompt, so its first space is kept.
  auto decoded = t.tok->decode(o.stats.tokens);
  if (!o.text.empty() && o.text.front() == ' ' && (decoded.empty() || decoded.front() != ' '))
    decoded.insert(decoded.begin(), ' ');
  CHECK(o.text == decoded);
}

TEST_CASE("the tiny model writes words of the licences") {
  sampling_params p;
  p.temperature = 0.0f;
  p.max_tokens = 32;
  p.ignore_eos = true;
  const auto o = run(p, 64, "This program is free software");
  // Bigram-fitted head: greedy text is made of common licence words.
  int known = 0, words = 0;
  std::string word;
  const std::string common = " the of to and a or in is that you this for any be by with "
                             "software program license work may not such as are on an "
                             "copyright it all under shall terms";
  for (char c : o.text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      ++words;
      known += common.find(" " + word + " ") != std::string::npos;
      word.clear();
    }
  }
  CAPTURE(o.text);
  CHECK(words >= 5);
  CHECK(known * 3 >= words); // a third or more are among the commonest words
}

TEST_CASE("seeded sampling reproduces, different seeds differ") {
  sampling_params p;
  p.temperature = 1.0f;
  p.top_p = 0.95f;
  p.max_tokens = 30;
  p.ignore_eos = true;
  p.seed = 1234;
  const auto a = run(p, 512), b = run(p, 4);
  CHECK(a.stats.tokens == b.stats.tokens);
  p.seed = 4321;
  CHECK(run(p, 512).stats.tokens != a.stats.tokens);
}

TEST_CASE("requests that cannot run are refused with one clear line") {
  auto& t = shared_tiny();
  cpu_executor ex(*t.weights, {16, 4, 1, 0});
  generator g(ex, *t.tok, {t.tok->eos_id()}, 64, 2048);
  sampling_params p;
  const auto none = [](std::string_view) {};
  CHECK_THROWS_WITH_AS(g.generate({}, p, none), "the prompt is empty", std::invalid_argument);
  p.max_tokens = 100; // 4 blocks of 16 hold 64 tokens
  CHECK_THROWS_WITH_AS(g.generate(t.tok->encode("hello", true), p, none),
                       "prompt + max_tokens needs 7 KV blocks, the cache has 4", std::invalid_argument);
  p.max_tokens = 5000;
  CHECK_THROWS_AS(g.generate(t.tok->encode("hello", true), p, none), std::invalid_argument);
  p.max_tokens = 4;
  CHECK_THROWS_WITH_AS(g.generate(std::vector<token_id>{1, 2000}, p, none),
                       "prompt token 2000 is outside the model's vocabulary of 2000", std::invalid_argument);
  CHECK_THROWS_AS(generator(ex, *t.tok, {}, 0, 2048), std::invalid_argument);
  p.top_p = 2.0f;
  CHECK_THROWS_AS(g.generate(t.tok->encode("hello", true), p, none), std::invalid_argument);
}

TEST_CASE("a padded vocabulary: every sampled id is one the tokenizer can spell") {
  padded m;
  const auto spellable = static_cast<token_id>(m.tok->vocab_size());
  REQUIRE(m.weights->config.vocab_size == 4 * spellable);
  const auto prompt = m.tok->encode("Permission is hereby granted", true);
  // The ids of 48 tokens from the executor limited to num_sampled ids.
  const auto generate = [&](const sampling_params& p, std::int64_t num_sampled) {
    cpu_executor ex(*m.weights, {.block_size = 16, .num_kv_blocks = 16, .num_threads = 1, .seed = 3,
                                 .num_sampled_ids = num_sampled});
    generator g(ex, *m.tok, {m.tok->eos_id()}, 8, 2048);
    return g.generate(prompt, p, [](std::string_view) {}).tokens;
  };
  const auto past = [&](const std::vector<token_id>& ids) {
    return std::count_if(ids.begin(), ids.end(), [&](token_id t) { return t >= spellable; });
  };

  sampling_params p;
  p.max_tokens = 48;
  p.ignore_eos = true;
  p.seed = 11;
  std::vector<sampling_params> all;
  p.temperature = 0.0f;
  all.push_back(p);
  p.temperature = 1.0f;
  all.push_back(p);
  p.top_k = 20;
  all.push_back(p);
  p.top_k = 0;
  p.top_p = 0.9f;
  all.push_back(p);
  p.top_p = 1.0f;
  p.min_p = 0.05f;
  all.push_back(p);
  p.min_p = 0.0f;
  p.temperature = 0.7f;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.5f;
  p.logprobs = 3;
  all.push_back(p);
  for (std::size_t i = 0; i < all.size(); ++i) {
    CAPTURE(i);
    // The whole vocabulary, as before: the model does pick the padding.
    CHECK(past(generate(all[i], 0)) > 0);
    const auto ids = generate(all[i], spellable);
    CHECK(ids.size() == 48);
    CHECK(past(ids) == 0);
  }
}
