// The host side of device sampling, on the CPU: the rows the device sampler
// reads, their penalty lists, seeds as the CPU executor draws them, and the
// host fallback for requests that ask for top logprobs.

#include "engine/cuda/device_samplers.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace troupe;
using namespace troupe::cuda;

namespace {

auto step_of(std::vector<request_id> ids) -> scheduler_output {
  scheduler_output s;
  const std::vector<token_id> one{1};
  for (const auto id : ids) s.add_chunk(id, one, 5).sample = true;
  return s;
}

} // namespace

TEST_CASE("rows carry the parameters, a uniform only where a draw is made, and the seed's stream") {
  device_samplers d(99);
  sampling_params greedy, seeded;
  greedy.temperature = 0.0f;
  seeded.temperature = 0.8f;
  seeded.top_k = 40;
  seeded.top_p = 0.9f;
  seeded.seed = 1234;
  const std::vector<new_request_data> news{{1, {3, 4}, greedy}, {2, {5}, seeded}};
  d.add(news);
  const auto step = step_of({2, 1});
  const std::vector<std::int32_t> chunks{0, 1};
  d.prepare(step, chunks);
  REQUIRE(d.rows().size() == 2);
  const auto& r = d.rows()[0];
  CHECK(r.temperature == 0.8f);
  CHECK(r.top_k == 40);
  CHECK(r.top_p == 0.9f);
  rng same(1234);
  CHECK(r.uniform == static_cast<float>(same.uniform())); // the request's own stream
  CHECK(d.rows()[1].uniform == 0.0f);                    // greedy draws nothing
  CHECK_FALSE(d.any_on_host());
  d.prepare(step, chunks);
  CHECK(d.rows()[0].uniform == static_cast<float>(same.uniform())); // the next draw of the stream
}

TEST_CASE("penalty lists: the prompt's distinct tokens and the output's, with output counts") {
  device_samplers d(1);
  sampling_params p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.5f;
  const std::vector<new_request_data> news{{7, {9, 3, 9, 5}, p}, {8, {1}, sampling_params{}}};
  d.add(news);
  const auto step = step_of({7, 8});
  const std::vector<std::int32_t> chunks{0, 1};
  d.prepare(step, chunks);
  CHECK(std::vector<std::int32_t>(d.penalty_tokens().begin(), d.penalty_tokens().end()) == std::vector<std::int32_t>{3, 5, 9});
  CHECK(std::vector<std::int32_t>(d.penalty_counts().begin(), d.penalty_counts().end()) == std::vector<std::int32_t>{0, 0, 0});
  CHECK(d.rows()[1].penalty_count == 0); // no penalties: no list
  std::vector<float> none;
  d.result(0, 5, -1.0f, none);
  d.result(1, 2, -1.0f, none);
  d.prepare(step, chunks);
  d.result(0, 11, -1.0f, none);
  d.prepare(step, chunks);
  CHECK(std::vector<std::int32_t>(d.penalty_tokens().begin(), d.penalty_tokens().end()) == std::vector<std::int32_t>{3, 5, 9, 11});
  CHECK(std::vector<std::int32_t>(d.penalty_counts().begin(), d.penalty_counts().end()) == std::vector<std::int32_t>{0, 1, 0, 1});
  CHECK(d.rows()[0].penalty_first == 0);
  CHECK(d.rows()[0].penalty_count == 4);
  const std::vector<request_id> done{7, 8};
  d.forget(done);
  CHECK(d.size() == 0);
}

TEST_CASE("a request asking for top logprobs is sampled on the host, as the CPU sampler does") {
  device_samplers d(5);
  sampling_params p;
  p.temperature = 0.0f;
  p.logprobs = 2;
  const std::vector<new_request_data> news{{3, {1, 2}, p}};
  d.add(news);
  const auto step = step_of({3});
  const std::vector<std::int32_t> chunks{0};
  d.prepare(step, chunks);
  CHECK(d.any_on_host());
  std::vector<float> logits{0.0f, 2.0f, 1.0f, -1.0f};
  const auto res = d.result(0, 0, 0.0f, logits); // the device's answer is ignored
  CHECK(res.token == 1);
  REQUIRE(res.top_logprobs.size() == 2);
  CHECK(res.top_logprobs[0].token == 1);
  CHECK(res.top_logprobs[1].token == 2);
  CHECK(std::abs(res.logprob - (2.0f - std::log(std::exp(0.0f) + std::exp(2.0f) + std::exp(1.0f) + std::exp(-1.0f)))) < 1e-5);
}
