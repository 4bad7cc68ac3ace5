#include "engine/sampling/sampler.hpp"
#include "tests/engine/sampling/sampler_rig.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <span>
#include <vector>

using namespace troupe;

namespace {

constexpr int num_draws = 20000;

using testing::make_params;
using testing::random_logits;

/// Logits whose softmax is `probs`.
auto logits_of(const std::vector<double>& probs) -> std::vector<float> {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

/// softmax(logits / temperature) in double.
auto softmax(const std::vector<float>& logits, double temperature = 1.0) -> std::vector<double> {
  const double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p;
  for (float l : logits) p.push_back(std::exp((l - m) / temperature));
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= sum;
  return p;
}

/// `probs` renormalised over `keep`, zero elsewhere.
auto restrict_to(std::vector<double> probs, const std::set<int>& keep) -> std::vector<double> {
  double sum = 0.0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (!keep.contains(static_cast<int>(i))) probs[i] = 0.0;
    sum += probs[i];
  }
  for (double& x : probs) x /= sum;
  return probs;
}

/// Token counts over `n` draws, each from a fresh copy of `logits`.
auto count_draws(request_sampler& s, const std::vector<float>& logits, int n) -> std::vector<int> {
  std::vector<int> counts(logits.size());
  std::vector<float> scratch;
  for (int i = 0; i < n; ++i) {
    scratch = logits;
    ++counts[static_cast<std::size_t>(s.sample(scratch).token)];
  }
  return counts;
}

auto support(const std::vector<int>& counts) -> std::set<int> {
  std::set<int> out;
  for (std::size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0) out.insert(static_cast<int>(i));
  return out;
}

/// Pearson's statistic of `counts` against `probs`; tokens of probability 0
/// must never be drawn.
auto chi_square(const std::vector<int>& counts, const std::vector<double>& probs) -> double {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double stat = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0.0) {
      CHECK_MESSAGE(counts[i] == 0, "token ", i, " is outside the allowed set");
      continue;
    }
    const double expected = n * probs[i];
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

/// About the 1e-4 upper quantile of chi-square with df degrees of freedom.
auto chi_square_bound(const std::vector<double>& probs) -> double {
  const auto df = static_cast<double>(std::count_if(probs.begin(), probs.end(),
                                                    [](double p) { return p > 0.0; }) - 1);
  return df + 4.0 * std::sqrt(2.0 * df) + 8.0;
}

auto check_distribution(const std::vector<int>& counts, const std::vector<double>& probs) {
  const double stat = chi_square(counts, probs);
  CHECK_MESSAGE(stat < chi_square_bound(probs), "chi-square ", stat);
}

/// Ids sorted by descending logit, lower id first on ties.
auto ranked(const std::vector<float>& logits) -> std::vector<int> {
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  return ids;
}

auto greedy(const std::vector<float>& logits) -> token_id {
  return static_cast<token_id>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

} // namespace

TEST_CASE("sampler: plain softmax and temperature match their distributions") {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
  for (float t : {1.0f, 0.5f, 2.0f}) {
    CAPTURE(t);
    request_sampler s(make_params(t), {}, 0);
    const auto counts = count_draws(s, logits, num_draws);
    check_distribution(counts, softmax(logits, t));
    if (t != 1.0f) CHECK(chi_square(counts, softmax(logits, 1.0)) > 200.0); // the test has power
    CHECK(s.num_generated() == num_draws);
  }
}

TEST_CASE("sampler: temperature 0 and below 1e-5 is greedy, lowest id on ties") {
  const std::vector<float> logits{0.5f, 3.0f, -2.0f, 3.0f, 1.0f};
  for (float t : {0.0f, 1e-6f}) {
    request_sampler s(make_params(t), {}, 0);
    std::vector<float> scratch = logits;
    for (int i = 0; i < 50; ++i) {
      scratch = logits;
      CHECK(s.sample(scratch).token == 1);
    }
  }
}

TEST_CASE("sampler: logit_bias moves greedy, top-k and plain sampling; logprobs stay raw") {
  const std::vector<float> logits{0.5f, 3.0f, -2.0f, 2.9f, 1.0f};
  // Greedy: +0.2 on id 3 beats id 1; -100 on the argmax hands it to the next.
  auto p = make_params(0.0f);
  p.logit_bias = {{3, 0.2f}};
  request_sampler greedy_biased(p, {}, 0);
  std::vector<float> scratch = logits;
  const auto r = greedy_biased.sample(scratch);
  CHECK(r.token == 3);
  CHECK(r.logprob == doctest::Approx(std::log(softmax(logits)[3])).epsilon(1e-4)); // before the bias
  CHECK(scratch == logits); // the row is given back as it was
  p.logit_bias = {{1, -100.0f}};
  request_sampler banned(p, {}, 0);
  scratch = logits;
  CHECK(banned.sample(scratch).token == 3);
  // Sampled: the distribution is softmax(logits + bias), with top-k too.
  for (const std::int32_t k : {0, 2}) {
    CAPTURE(k);
    auto q = make_params(1.0f);
    q.top_k = k;
    q.logit_bias = {{2, 5.0f}, {1, -1.0f}};
    request_sampler s(q, {}, 0);
    auto biased = logits;
    biased[2] += 5.0f;
    biased[1] -= 1.0f;
    auto expected = softmax(biased);
    if (k == 2) expected = restrict_to(expected, {2, 3});
    check_distribution(count_draws(s, logits, num_draws), expected);
  }
}

TEST_CASE("sampler: temperature 1e-3 picks the argmax of logits 0.05 apart") {
  rng gen(5);
  request_sampler s(make_params(1e-3f), {}, 0);
  std::vector<float> logits(64);
  for (int step = 0; step < 300; ++step) {
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = 0.05f * static_cast<float>(i);
    for (std::size_t i = logits.size() - 1; i > 0; --i)
      std::swap(logits[i], logits[gen.next() % (i + 1)]);
    const token_id expected = greedy(logits);
    REQUIRE(s.sample(logits).token == expected);
  }
}

TEST_CASE("sampler: top-k stays in the k most likely and renormalises") {
  const std::vector<float> logits{1.0f, 2.0f, 0.5f, 3.0f, 2.5f, -1.0f, 0.0f, 1.5f};
  auto p = make_params(1.0f);
  p.top_k = 3;
  request_sampler s(p, {}, 0);
  const auto counts = count_draws(s, logits, num_draws);
  CHECK(support(counts) == std::set<int>{1, 3, 4});
  check_distribution(counts, restrict_to(softmax(logits), {1, 3, 4}));

  SUBCASE("ties go to the lower ids") {
    p.top_k = 2;
    request_sampler tied(p, {}, 0);
    CHECK(support(count_draws(tied, {1.0f, 1.0f, 1.0f, 1.0f}, 2000)) == std::set<int>{0, 1});
  }
  SUBCASE("-1, 0 and k >= vocab are off") {
    for (int k : {-1, 0, 8, 100}) {
      p.top_k = k;
      request_sampler off(p, {}, 0);
      check_distribution(count_draws(off, logits, num_draws), softmax(logits));
    }
  }
}

TEST_CASE("sampler: top-p keeps the smallest nucleus holding the mass") {
  const std::vector<double> probs{0.05, 0.4, 0.1, 0.25, 0.05, 0.15};
  const auto logits = logits_of(probs);
  auto p = make_params(1.0f);
  p.top_p = 0.75f; // 0.4 + 0.25 = 0.65 < 0.75 <= 0.8 = 0.4 + 0.25 + 0.15
  request_sampler s(p, {}, 0);
  const auto counts = count_draws(s, logits, num_draws);
  CHECK(support(counts) == std::set<int>{1, 3, 5});
  check_distribution(counts, restrict_to(probs, {1, 3, 5}));

  SUBCASE("a tiny top_p keeps only the most likely token") {
    p.top_p = 1e-4f;
    request_sampler tiny(p, {}, 0);
    CHECK(support(count_draws(tiny, logits, 1000)) == std::set<int>{1});
  }
}

TEST_CASE("sampler: top-p over a large nucleus of tied tokens") {
  // 300 equal tokens at ids 0, 3, ..., 897 among 1000; the nucleus for 0.499 is
  // the 150 lowest of them, cut inside one probability bucket.
  std::vector<float> logits(1000, -20.0f);
  for (int i = 0; i < 300; ++i) logits[static_cast<std::size_t>(3 * i)] = 0.0f;
  std::set<int> nucleus;
  for (int i = 0; i < 150; ++i) nucleus.insert(3 * i);
  auto p = make_params(1.0f);
  p.top_p = 0.499f;
  request_sampler s(p, {}, 0);
  const auto counts = count_draws(s, logits, num_draws);
  CHECK(support(counts) == nucleus);
  check_distribution(counts, restrict_to(softmax(logits), nucleus));
}

TEST_CASE("sampler: top-p never leaves the nucleus of random logits") {
  const auto logits = random_logits(2000, 77, 2.0);
  const auto probs = softmax(logits);
  std::set<int> nucleus;
  double mass = 0.0;
  for (int id : ranked(logits)) {
    nucleus.insert(id);
    mass += probs[static_cast<std::size_t>(id)];
    if (mass >= 0.9) break;
  }
  REQUIRE(nucleus.size() > 200); // spans many probability buckets
  auto p = make_params(1.0f);
  p.top_p = 0.9f;
  request_sampler s(p, {}, 0);
  const auto counts = count_draws(s, logits, num_draws);
  for (int id : support(counts)) CHECK(nucleus.contains(id));
  // Every nucleus token expected 15+ times shows up, so it is not too small.
  const auto renormalised = restrict_to(probs, nucleus);
  for (int id : nucleus)
    if (renormalised[static_cast<std::size_t>(id)] * num_draws >= 15.0)
      CHECK(counts[static_cast<std::size_t>(id)] > 0);
}

TEST_CASE("sampler: top-k applies before top-p") {
  // Top-4 renormalised: 0.444, 0.278, 0.167, 0.111; 0.7 needs two of them.
  // Over the full distribution 0.7 would need three.
  const std::vector<double> probs{0.4, 0.25, 0.15, 0.1, 0.05, 0.05};
  const auto logits = logits_of(probs);
  auto p = make_params(1.0f);
  p.top_k = 4;
  p.top_p = 0.7f;
  request_sampler s(p, {}, 0);
  const auto counts = count_draws(s, logits, num_draws);
  CHECK(support(counts) == std::set<int>{0, 1});
  check_distribution(counts, restrict_to(probs, {0, 1}));
}

TEST_CASE("sampler: min-p drops tokens below min_p * p_max") {
  const std::vector<double> probs{0.06, 0.5, 0.04, 0.3, 0.1};
  const auto logits = logits_of(probs);
  auto p = make_params(1.0f);
  p.min_p = 0.15f; // bound 0.075
  request_sampler s(p, {}, 0);
  const auto counts = count_draws(s, logits, num_draws);
  CHECK(support(counts) == std::set<int>{1, 3, 4});
  check_distribution(counts, restrict_to(probs, {1, 3, 4}));

  SUBCASE("after temperature") {
    // At t = 2 the ratios to p_max are sqrt(0.12, 1, 0.08, 0.6, 0.2):
    // 0.346, 1, 0.283, 0.775, 0.447; min_p 0.3 drops only token 2.
    p.temperature = 2.0f;
    p.min_p = 0.3f;
    request_sampler hot(p, {}, 0);
    const auto hot_counts = count_draws(hot, logits, num_draws);
    CHECK(support(hot_counts) == std::set<int>{0, 1, 3, 4});
    check_distribution(hot_counts, restrict_to(softmax(logits, 2.0), {0, 1, 3, 4}));
  }
  SUBCASE("with top-k") {
    p.top_k = 2;
    p.min_p = 0.7f; // 0.3 / 0.5 = 0.6 < 0.7
    request_sampler both(p, {}, 0);
    CHECK(support(count_draws(both, logits, 1000)) == std::set<int>{1});
  }
}

TEST_CASE("sampler: same seed, same tokens; other seeds differ") {
  auto p = make_params(0.8f);
  p.top_k = 50;
  p.top_p = 0.95f;
  p.frequency_penalty = 0.5f;
  const auto run = [](const sampling_params& params, std::uint64_t fallback) {
    request_sampler s(params, std::vector<token_id>{3, 4, 5}, fallback);
    std::vector<token_id> out;
    for (std::uint64_t step = 0; step < 200; ++step) {
      auto logits = random_logits(1000, 1000 + step, 1.5);
      out.push_back(s.sample(logits).token);
    }
    return out;
  };
  const auto a = run(p, 1);
  CHECK(run(p, 2) == a); // params.seed wins over the fallback
  auto other = p;
  other.seed = 1235;
  CHECK(run(other, 1) != a);
  other.seed.reset();
  CHECK(run(other, 7) == run(other, 7));
  CHECK(run(other, 7) != run(other, 8));
  CHECK(std::set<token_id>(a.begin(), a.end()).size() > 50); // it does sample
}

TEST_CASE("sampler: repetition penalty divides positive and multiplies negative logits") {
  auto p = make_params(0.0f);
  p.repetition_penalty = 1.2f;
  const std::vector<token_id> prompt{0, 0, 7}; // 7 is outside the vocab: ignored

  std::vector<float> logits{2.0f, 1.9f, 0.0f}; // 2 / 1.2 = 1.67 < 1.9
  CHECK(request_sampler(p, prompt, 0).sample(logits).token == 1);
  logits = {-1.0f, -1.1f, -5.0f}; // -1.2 < -1.1
  CHECK(request_sampler(p, prompt, 0).sample(logits).token == 1);
  p.repetition_penalty = 1.0f;
  logits = {2.0f, 1.9f, 0.0f};
  CHECK(request_sampler(p, prompt, 0).sample(logits).token == 0);

  SUBCASE("once per token, in prompt and output alike") {
    p.repetition_penalty = 1.2f;
    request_sampler s(p, std::vector<token_id>{0}, 0);
    // 2 / 1.2 = 1.67 > 1.5 wins; twice penalised 2 / 1.44 = 1.39 would lose.
    for (int i = 0; i < 3; ++i) {
      logits = {2.0f, 1.5f};
      CHECK(s.sample(logits).token == 0);
    }
  }
  SUBCASE("output tokens are penalised too") {
    p.repetition_penalty = 1.2f;
    request_sampler s(p, {}, 0);
    std::vector<token_id> got;
    for (int i = 0; i < 3; ++i) {
      logits = {2.0f, 1.9f};
      got.push_back(s.sample(logits).token);
    }
    CHECK(got == std::vector<token_id>{0, 1, 0}); // then 1.67 vs 1.58
  }
}

TEST_CASE("sampler: frequency penalty subtracts per occurrence") {
  auto p = make_params(0.0f);
  p.frequency_penalty = 0.3f;
  request_sampler s(p, {}, 0);
  std::vector<token_id> got;
  for (int i = 0; i < 7; ++i) {
    std::vector<float> logits{1.0f, 0.5f, 0.0f};
    got.push_back(s.sample(logits).token);
  }
  CHECK(got == std::vector<token_id>{0, 0, 1, 0, 1, 0, 2});
}

TEST_CASE("sampler: presence penalty subtracts once per seen token") {
  auto p = make_params(0.0f);
  p.presence_penalty = 0.3f;
  request_sampler s(p, std::vector<token_id>{2}, 0); // the prompt does not count
  std::vector<token_id> got;
  for (int i = 0; i < 6; ++i) {
    std::vector<float> logits{1.0f, 0.8f, 0.5f};
    got.push_back(s.sample(logits).token);
  }
  CHECK(got == std::vector<token_id>{0, 1, 0, 0, 0, 0});
}

TEST_CASE("sampler: penalties shape the sampled distribution at temperature 1") {
  // Prompt token 0 with penalty 2: logits {2, 1, 0} become {1, 1, 0}. One
  // draw per fresh sampler, so output tokens never add a penalty.
  const std::vector<float> logits{2.0f, 1.0f, 0.0f};
  sampling_params p;
  p.repetition_penalty = 2.0f;
  std::vector<int> counts(3);
  for (int i = 0; i < num_draws; ++i) {
    request_sampler s(p, std::vector<token_id>{0}, static_cast<std::uint64_t>(i));
    auto scratch = logits;
    ++counts[static_cast<std::size_t>(s.sample(scratch).token)];
  }
  check_distribution(counts, softmax({1.0f, 1.0f, 0.0f}));
  CHECK(chi_square(counts, softmax(logits)) > 200.0);
}

TEST_CASE("sampler: logprobs are the raw log_softmax, top-n best first") {
  auto logits = random_logits(50, 3, 2.0);
  logits[20] = 9.0f; // ties at the top: lower id first
  logits[10] = 9.0f;
  logits[33] = 8.0f;
  std::vector<double> expected(logits.size());
  const double m = 9.0;
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l - m);
  for (std::size_t i = 0; i < logits.size(); ++i) expected[i] = logits[i] - m - std::log(sum);

  auto p = make_params(0.7f);
  p.logprobs = 5;
  p.repetition_penalty = 1.5f; // penalties and temperature do not move logprobs
  p.presence_penalty = 1.0f;
  request_sampler s(p, std::vector<token_id>{10, 20}, 0);
  for (int step = 0; step < 20; ++step) {
    auto scratch = logits;
    const auto r = s.sample(scratch);
    CHECK(std::abs(r.logprob - expected[static_cast<std::size_t>(r.token)]) < 1e-5);
    REQUIRE(r.top_logprobs.size() == 5);
    const auto order = ranked(logits);
    CHECK(r.top_logprobs[0].token == 10);
    CHECK(r.top_logprobs[1].token == 20);
    CHECK(r.top_logprobs[2].token == 33);
    for (std::size_t j = 0; j < 5; ++j) {
      CHECK(r.top_logprobs[j].token == order[j]);
      CHECK(std::abs(r.top_logprobs[j].logprob -
                     expected[static_cast<std::size_t>(order[j])]) < 1e-5);
      if (j > 0) CHECK(r.top_logprobs[j].logprob <= r.top_logprobs[j - 1].logprob);
    }
  }

  SUBCASE("0 and -1 give no top list; n is capped at the vocab") {
    for (int n : {0, -1}) {
      p.logprobs = n;
      auto scratch = logits;
      const auto r = request_sampler(p, {}, 0).sample(scratch);
      CHECK(r.top_logprobs.empty());
      CHECK(std::abs(r.logprob - expected[static_cast<std::size_t>(r.token)]) < 1e-5);
    }
    p.logprobs = 20;
    std::vector<float> small{0.0f, 1.0f, 2.0f};
    const auto r = request_sampler(p, {}, 0).sample(small);
    REQUIRE(r.top_logprobs.size() == 3);
    CHECK(r.top_logprobs[0].token == 2);
    CHECK(r.top_logprobs[2].token == 0);
  }
}

TEST_CASE("sampler: large vocabulary with top-k, top-p and greedy") {
  const auto logits = random_logits(128000, 11, 3.0);
  const auto order = ranked(logits);
  const std::set<int> top40(order.begin(), order.begin() + 40);
  auto p = make_params(1.0f);
  p.top_k = 40;
  request_sampler s(p, {}, 0);
  const auto counts = count_draws(s, logits, 300);
  for (int id : support(counts)) CHECK(top40.contains(id));
  CHECK(support(counts).size() > 10);

  p.top_k = 0;
  p.top_p = 0.5f;
  const auto probs = softmax(logits);
  std::set<int> nucleus;
  double mass = 0.0;
  for (std::size_t j = 0; mass < 0.5; ++j) {
    nucleus.insert(order[j]);
    mass += probs[static_cast<std::size_t>(order[j])];
  }
  request_sampler nucleus_sampler(p, {}, 0);
  const auto nucleus_counts = count_draws(nucleus_sampler, logits, 300);
  for (int id : support(nucleus_counts)) CHECK(nucleus.contains(id));
  CHECK(support(nucleus_counts).size() > 10);

  auto scratch = logits;
  CHECK(request_sampler(make_params(0.0f), {}, 0).sample(scratch).token == order[0]);
}

TEST_CASE("sampler: top-k among many equal logits keeps the lowest ids") {
  std::vector<float> logits(5000, 1.0f);
  logits[4000] = 1.5f;
  auto p = make_params(1.0f);
  p.top_k = 100;
  std::set<int> expected{4000};
  for (int i = 0; i < 99; ++i) expected.insert(i);
  request_sampler s(p, {}, 0);
  CHECK(support(count_draws(s, logits, 5000)) == expected);
}

TEST_CASE("sampler: NaN and infinite logits never crash or pick the impossible") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float temperature : {0.0f, 0.7f, 1.0f}) {
    for (int mode = 0; mode < 3; ++mode) {
      auto p = make_params(temperature);
      if (mode == 1) p.top_p = 0.9f;
      if (mode == 2) p.top_k = 2;
      CAPTURE(temperature);
      CAPTURE(mode);
      request_sampler s(p, {}, 1);
      for (int draw = 0; draw < 50; ++draw) {
        std::vector<float> logits{nan, 1.0f, inf, nan, -inf, 0.5f};
        const auto r = s.sample(logits);
        CHECK(r.token == 2); // the +inf logit outweighs every finite one
      }
      std::vector<float> broken{nan, -inf, nan};
      CHECK(s.sample(broken).token == 0); // nothing possible: the lowest id
    }
  }
}

TEST_CASE("sampler: a prefix of the row is all it may pick, whatever lies past it") {
  // A padded row: the model has 1000 rows, the tokenizer spells the first
  // 700; the padding holds the largest logits by far.
  constexpr std::size_t num_rows = 1000, allowed = 700;
  auto row = random_logits(num_rows, 21, 2.0);
  row[allowed + 3] = 100.0f;
  row[num_rows - 1] = 90.0f;
  const std::vector<float> prefix(row.begin(), row.begin() + allowed);
  const auto probs = softmax(prefix);
  const auto order = ranked(prefix);

  struct mode {
    const char* name;
    float temperature;
    std::int32_t top_k;
    float top_p, min_p;
    bool penalties;
  };
  for (const mode m : {mode{"greedy", 0.0f, 0, 1.0f, 0.0f, false}, mode{"temperature 1", 1.0f, 0, 1.0f, 0.0f, false},
                       mode{"temperature 0.7", 0.7f, 0, 1.0f, 0.0f, false}, mode{"top-k", 1.0f, 20, 1.0f, 0.0f, false},
                       mode{"top-p", 0.9f, 0, 0.8f, 0.0f, false}, mode{"min-p", 1.0f, 0, 1.0f, 0.01f, false},
                       mode{"greedy, penalties", 0.0f, 0, 1.0f, 0.0f, true},
                       mode{"everything, penalties", 0.8f, 50, 0.9f, 0.001f, true}}) {
    CAPTURE(m.name);
    auto p = make_params(m.temperature);
    p.top_k = m.top_k;
    p.top_p = m.top_p;
    p.min_p = m.min_p;
    p.logprobs = 5;
    if (m.penalties) {
      p.repetition_penalty = 1.3f;
      p.presence_penalty = 0.5f;
      p.frequency_penalty = 0.2f;
    }
    // Prompt ids past the prefix (even past the row) are ignored by the penalties.
    request_sampler s(p, std::vector<token_id>{3, static_cast<token_id>(allowed + 3), 1 << 30}, 0);
    std::vector<int> counts(num_rows);
    for (int draw = 0; draw < 2000; ++draw) {
      auto scratch = row;
      const auto r = s.sample(std::span(scratch).first(allowed));
      REQUIRE(r.token >= 0);
      REQUIRE(r.token < static_cast<token_id>(allowed));
      ++counts[static_cast<std::size_t>(r.token)];
      // Logprobs over [0, allowed): the padding has probability 0, not ~1.
      CHECK(std::abs(r.logprob - std::log(probs[static_cast<std::size_t>(r.token)])) < 1e-4);
      REQUIRE(r.top_logprobs.size() == 5);
      for (std::size_t j = 0; j < 5; ++j) {
        CHECK(r.top_logprobs[j].token == order[j]);
        CHECK(std::abs(r.top_logprobs[j].logprob - std::log(probs[static_cast<std::size_t>(order[j])])) < 1e-4);
      }
      // Nothing past the span is touched.
      CHECK(std::equal(scratch.begin() + allowed, scratch.end(), row.begin() + allowed));
    }
    if (m.temperature == 0.0f && !m.penalties) CHECK(counts[static_cast<std::size_t>(order[0])] == 2000);
    if (m.temperature > 0.0f) CHECK(support(counts).size() > 1);
  }
}
