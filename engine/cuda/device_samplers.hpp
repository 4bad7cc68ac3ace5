#pragma once
// The host side of sampling on the device, in plain C++ (built into
// troupe_engine and tested on any machine): each request's parameters,
// seeded random stream and penalty counts, as the CPU sampler keeps them;
// per step, the rows the device sampler reads (with the uniform each draw
// uses and the penalised tokens), and the results recorded back. Requests
// asking for top logprobs or a logit_bias are sampled here, by the CPU sampler.

#include "engine/core/scheduler_output.hpp"
#include "base/rng.hpp"
#include "engine/sampling/sampler.hpp"
#include "kernels/sampling_row.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

namespace troupe::cuda {

class device_samplers {
public:
  /// `seed` draws the seeds of requests that bring none, as the CPU executor does.
  explicit device_samplers(std::uint64_t seed) : seed_source_(seed) {}

  /// The step's new requests in, its finished ones out.
  void add(std::span<const new_request_data> requests);
  void forget(std::span<const request_id> finished);

  /// The rows for the step's sampled chunks (`chunks`: their indices in
  /// step.scheduled, in order) and their penalty lists.
  void prepare(const scheduler_output& step, std::span<const std::int32_t> chunks);
  auto rows() const -> std::span<const kernels::sampling_row> { return rows_; }
  auto penalty_tokens() const -> std::span<const std::int32_t> { return penalty_tokens_; }
  auto penalty_counts() const -> std::span<const std::int32_t> { return penalty_counts_; }
  /// Some row is sampled on the host (its raw logits are needed).
  auto any_on_host() const -> bool { return any_on_host_; }

  /// Row j's result: the device's token and logprob, or for a host row the
  /// CPU sampler's draw from `logits` (its raw logits, overwritten);
  /// recorded for the penalties.
  auto result(std::size_t j, token_id device_token, float device_logprob, std::span<float> logits) -> sample_result;
  auto size() const -> std::size_t { return requests_.size(); }

private:
  struct state {
    sampling_params params;
    rng stream;
    std::vector<token_id> prompt_set; ///< sorted, distinct (repetition penalty)
    std::map<token_id, std::int32_t> output_counts;
    std::unique_ptr<request_sampler> host;
    auto penalised() const -> bool {
      return params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f;
    }
  };

  rng seed_source_;
  std::unordered_map<request_id, state> requests_;
  std::vector<state*> step_states_; ///< the prepared rows' requests
  std::vector<kernels::sampling_row> rows_;
  std::vector<std::int32_t> penalty_tokens_, penalty_counts_;
  bool any_on_host_ = false;
};

} // namespace troupe::cuda
