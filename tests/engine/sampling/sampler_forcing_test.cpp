// What the sampler forces rather than draws: a spent thinking budget's close
// marker, and jump-forward's tokens where a grammar leaves one continuation.

#include "engine/grammar/compiled_grammar.hpp"
#include "engine/grammar/grammar.hpp"
#include "engine/sampling/sampler.hpp"
#include "tests/engine/sampling/sampler_rig.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace troupe;

namespace {

using testing::make_params;
using testing::random_logits;

/// Greedy picks `want` from 16 logits: it leads by 1, everything else 0.
auto leading(token_id want) -> std::vector<float> {
  std::vector<float> l(16, 0.0f);
  l[static_cast<std::size_t>(want)] = 1.0f;
  return l;
}

/// The greedy tokens of `s` over logits led by `wants`, in turn.
auto greedy_run(request_sampler& s, const std::vector<token_id>& wants) -> std::vector<token_id> {
  std::vector<token_id> got;
  for (const token_id w : wants) {
    auto l = leading(w);
    got.push_back(s.sample(l).token);
  }
  return got;
}

} // namespace

TEST_CASE("sampler: a spent thinking budget forces the close marker, one token a step") {
  sampling_params p = make_params(0.0f);
  p.thinking_open = {8};
  p.thinking_close = {9, 10};
  p.thinking_budget = 2;
  p.max_tokens = 100;
  request_sampler s(p, {}, 1);
  // <think> opens; two tokens inside; then </think> is forced over what
  // leads (its two tokens); outside, the model is free again; a block opened
  // again has no budget left and is closed at once.
  const auto got = greedy_run(s, {8, 5, 5, 5, 5, 5, 8, 5, 5, 5});
  CHECK(got == std::vector<token_id>{8, 5, 5, 9, 10, 5, 8, 9, 10, 5});

  // A forced token's logprob is 0: it is all that is left, as under a mask.
  request_sampler t(p, {}, 1);
  greedy_run(t, {8, 5, 5});
  auto l = leading(5);
  const auto forced = t.sample(l);
  CHECK(forced.token == 9);
  CHECK(forced.logprob == 0.0f);
}

TEST_CASE("sampler: the thinking budget counts from the prompt's open block and stops at a natural close") {
  sampling_params p = make_params(0.0f);
  p.thinking_open = {8};
  p.thinking_close = {9};
  p.thinking_budget = 3;
  p.thinking_opened = true;
  request_sampler natural(p, {}, 1);
  CHECK(greedy_run(natural, {5, 9, 5, 5, 5, 5, 5}) == std::vector<token_id>{5, 9, 5, 5, 5, 5, 5});
  request_sampler spent(p, {}, 1);
  CHECK(greedy_run(spent, {5, 5, 5, 5, 5}) == std::vector<token_id>{5, 5, 5, 9, 5});
  p.thinking_budget = 0;
  request_sampler none(p, {}, 1);
  CHECK(greedy_run(none, {5, 5}) == std::vector<token_id>{9, 5});
  p.thinking_budget = -1;
  request_sampler off(p, {}, 1);
  CHECK(greedy_run(off, {5, 5, 5, 5, 5}) == std::vector<token_id>{5, 5, 5, 5, 5});
}

TEST_CASE("sampler: a thinking budget leaves the draws before it untouched") {
  // Seeded sampling at temperature 1: the budget changes the token where it
  // is spent, and the random stream stays the same before it.
  sampling_params p = make_params(1.0f);
  p.thinking_close = {3};
  p.thinking_opened = true;
  auto logits = random_logits(64, 7, 2.0);
  logits[3] = -40.0f; // the model itself never closes the block
  request_sampler free_run(p, {}, 1);
  p.thinking_budget = 20;
  request_sampler budget_run(p, {}, 1);
  for (int i = 0; i < 20; ++i) {
    auto a = logits, b = logits;
    CHECK(free_run.sample(a).token == budget_run.sample(b).token);
  }
  auto b = logits;
  CHECK(budget_run.sample(b).token == 3);
}

namespace {

/// 16 ids: 0 "a", 1 "b", 2 "ab", 3 "x", 4 "y", 5 "c", 6 "cd", 7 "cde",
/// 8 "ef", 9 "f", 10 the end; the rest never picked.
auto small_grammar(const char* gbnf) -> std::shared_ptr<grammar::compiled_grammar> {
  std::vector<std::string> surfaces = {"a", "b", "ab", "x", "y", "c", "cd", "cde", "ef", "f"};
  surfaces.resize(16);
  auto vocab = std::make_shared<const grammar::token_vocabulary>(std::move(surfaces), std::vector<token_id>{10});
  return std::make_shared<grammar::compiled_grammar>(grammar::parse_gbnf(gbnf), vocab);
}

} // namespace

TEST_CASE("sampler: jump-forward writes the bytes a grammar forces as the longest tokens, after the sampled one") {
  const char* gbnf = R"(root ::= "ab" [xy] "cdef")";
  sampling_params p = make_params(0.0f);
  p.max_tokens = 10;
  request_sampler s(p, {}, 1, small_grammar(gbnf), true);
  // "ab" is forced from the start, but the first token is the model's: it
  // picks "a" (leading), then "b" is forced; then x or y is the model's, and
  // "cdef" is forced as "cde" "f".
  auto l = leading(0);
  auto first = s.sample(l);
  CHECK(first.token == 0);
  CHECK(first.forced == std::vector<token_id>{1});
  l = leading(4);
  auto second = s.sample(l);
  CHECK(second.token == 4);
  CHECK(second.forced == std::vector<token_id>{7, 9});
  CHECK(s.num_generated() == 5);
  // Then only the end is left.
  l = leading(3);
  CHECK(s.sample(l).token == 10);

  // Off, or with logprobs asked for: one token a step.
  request_sampler off(p, {}, 1, small_grammar(gbnf), false);
  l = leading(0);
  CHECK(off.sample(l).forced.empty());
  p.logprobs = 0;
  request_sampler scored(p, {}, 1, small_grammar(gbnf), true);
  l = leading(0);
  CHECK(scored.sample(l).forced.empty());
}

TEST_CASE("sampler: jump-forward leaves a token for the model within max_tokens") {
  // The mask's promise (one token per byte, one for the end) already keeps
  // the forced bytes within the tokens left; where a budget too small for
  // the grammar broke it, forcing still leaves the last token to the model.
  for (const auto& [max_tokens, want] : {std::pair{10, std::vector<token_id>{7, 9}}, std::pair{3, std::vector<token_id>{}}}) {
    CAPTURE(max_tokens);
    sampling_params p = make_params(0.0f);
    p.max_tokens = max_tokens;
    request_sampler s(p, {}, 1, small_grammar(R"(root ::= "ab" [xy] "cdef")"), true);
    auto l = leading(2);
    CHECK(s.sample(l).forced.empty()); // "ab"; then x or y is the model's
    l = leading(3);
    const auto x = s.sample(l);
    CHECK(x.token == 3);
    CHECK(x.forced == want);
    CHECK(s.num_generated() == 2 + static_cast<std::int32_t>(want.size()));
  }
}
