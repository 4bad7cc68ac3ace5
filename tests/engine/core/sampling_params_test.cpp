#include "engine/core/sampling_params.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/model/model_config.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace troupe;

namespace {

/// Default params with one field changed.
template <class F>
auto with(F change) -> sampling_params {
  sampling_params p;
  change(p);
  return p;
}

} // namespace

TEST_CASE("sampling_params: defaults are valid") {
  CHECK(sampling_params{}.validate() == "");
}

TEST_CASE("sampling_params: range boundaries are valid") {
  CHECK(with([](auto& p) { p.temperature = 0.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.temperature = 100.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.top_k = -1; }).validate() == "");
  CHECK(with([](auto& p) { p.top_k = 0; }).validate() == "");
  CHECK(with([](auto& p) { p.top_k = 1; }).validate() == "");
  CHECK(with([](auto& p) { p.top_p = 1e-6f; }).validate() == "");
  CHECK(with([](auto& p) { p.min_p = 0.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.min_p = 1.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.repetition_penalty = 0.01f; }).validate() == "");
  CHECK(with([](auto& p) { p.presence_penalty = -2.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.presence_penalty = 2.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.frequency_penalty = -2.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.frequency_penalty = 2.0f; }).validate() == "");
  CHECK(with([](auto& p) { p.max_tokens = 1; }).validate() == "");
  CHECK(with([](auto& p) { p.logprobs = 0; }).validate() == "");
  CHECK(with([](auto& p) { p.logprobs = 20; }).validate() == "");
  CHECK(with([](auto& p) { p.stop = {"a", "\n\n"}; }).validate() == "");
  CHECK(with([](auto& p) { p.stop_token_ids = {0, 2}; }).validate() == "");
  CHECK(with([](auto& p) { p.seed = 0; }).validate() == "");
}

TEST_CASE("sampling_params: temperature") {
  CHECK(with([](auto& p) { p.temperature = -0.5f; }).validate() ==
        "temperature must be >= 0 and finite, got -0.5");
  CHECK(with([](auto& p) { p.temperature = std::numeric_limits<float>::infinity(); })
            .validate() ==
        "temperature must be >= 0 and finite, got inf");
  CHECK(with([](auto& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); })
            .validate() == "temperature must be >= 0 and finite, got nan");
}

TEST_CASE("sampling_params: top_k") {
  CHECK(with([](auto& p) { p.top_k = -2; }).validate() == "top_k must be -1, 0 or >= 1, got -2");
}

TEST_CASE("sampling_params: top_p") {
  CHECK(with([](auto& p) { p.top_p = 1.5f; }).validate() == "top_p must be in (0, 1], got 1.5");
  CHECK(with([](auto& p) { p.top_p = 0.0f; }).validate() == "top_p must be in (0, 1], got 0");
  CHECK(with([](auto& p) { p.top_p = -0.25f; }).validate() ==
        "top_p must be in (0, 1], got -0.25");
  CHECK(with([](auto& p) { p.top_p = std::numeric_limits<float>::quiet_NaN(); }).validate() ==
        "top_p must be in (0, 1], got nan");
}

TEST_CASE("sampling_params: min_p") {
  CHECK(with([](auto& p) { p.min_p = -0.5f; }).validate() == "min_p must be in [0, 1], got -0.5");
  CHECK(with([](auto& p) { p.min_p = 1.25f; }).validate() == "min_p must be in [0, 1], got 1.25");
}

TEST_CASE("sampling_params: repetition_penalty") {
  CHECK(with([](auto& p) { p.repetition_penalty = 0.0f; }).validate() ==
        "repetition_penalty must be > 0 and finite, got 0");
  CHECK(with([](auto& p) { p.repetition_penalty = -1.0f; }).validate() ==
        "repetition_penalty must be > 0 and finite, got -1");
  CHECK(with([](auto& p) { p.repetition_penalty = std::numeric_limits<float>::infinity(); })
            .validate() == "repetition_penalty must be > 0 and finite, got inf");
}

TEST_CASE("sampling_params: presence and frequency penalties") {
  CHECK(with([](auto& p) { p.presence_penalty = 2.5f; }).validate() ==
        "presence_penalty must be in [-2, 2], got 2.5");
  CHECK(with([](auto& p) { p.presence_penalty = -2.5f; }).validate() ==
        "presence_penalty must be in [-2, 2], got -2.5");
  CHECK(with([](auto& p) { p.frequency_penalty = -3.0f; }).validate() ==
        "frequency_penalty must be in [-2, 2], got -3");
  CHECK(with([](auto& p) { p.frequency_penalty = 2.125f; }).validate() ==
        "frequency_penalty must be in [-2, 2], got 2.125");
}

TEST_CASE("sampling_params: max_tokens") {
  CHECK(with([](auto& p) { p.max_tokens = 0; }).validate() == "max_tokens must be >= 1, got 0");
  CHECK(with([](auto& p) { p.max_tokens = -7; }).validate() == "max_tokens must be >= 1, got -7");
}

TEST_CASE("sampling_params: logprobs") {
  CHECK(with([](auto& p) { p.logprobs = 21; }).validate() ==
        "logprobs must be in [-1, 20], got 21");
  CHECK(with([](auto& p) { p.logprobs = -2; }).validate() ==
        "logprobs must be in [-1, 20], got -2");
}

TEST_CASE("sampling_params: stop strings and stop token ids") {
  CHECK(with([](auto& p) { p.stop = {"ok", ""}; }).validate() == "stop[1] must not be empty");
  CHECK(with([](auto& p) { p.stop_token_ids = {5, 0, -1}; }).validate() ==
        "stop_token_ids[2] must be >= 0, got -1");
}

TEST_CASE("sampling_params: logit_bias") {
  CHECK(with([](auto& p) { p.logit_bias = {{3, -100.0f}, {4, 100.0f}}; }).validate().empty());
  CHECK(with([](auto& p) { p.logit_bias = {{3, 100.5f}}; }).validate() ==
        "logit_bias must map to biases in [-100, 100], got 100.5 for token 3");
  CHECK(with([](auto& p) { p.logit_bias = {{3, std::nanf("")}}; }).validate() ==
        "logit_bias must map to biases in [-100, 100], got nan for token 3");
  CHECK(with([](auto& p) { p.logit_bias = {{-1, 1.0f}}; }).validate() ==
        "logit_bias must map token ids >= 0, got -1");
}

TEST_CASE("sampling_params: the first bad field is reported") {
  sampling_params p;
  p.top_p = 2.0f;
  p.max_tokens = 0;
  CHECK(p.validate() == "top_p must be in (0, 1], got 2");
}

TEST_CASE("sampling_params: a model's generation_config supplies the defaults") {
  troupe::model_config c;
  const auto plain = troupe::default_sampling_params(c);
  CHECK(plain.temperature == 1.0f);
  CHECK(plain.top_p == 1.0f);
  CHECK(plain.top_k == 0);
  c.default_temperature = 0.6f;
  c.default_top_p = 0.9f;
  c.default_top_k = 40;
  const auto p = troupe::default_sampling_params(c);
  CHECK(p.temperature == 0.6f);
  CHECK(p.top_p == 0.9f);
  CHECK(p.top_k == 40);
  CHECK(p.max_tokens == troupe::sampling_params{}.max_tokens);
}
