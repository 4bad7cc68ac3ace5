#include "engine/cuda/device_samplers.hpp"

#include "base/check.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::cuda {

void device_samplers::add(std::span<const new_request_data> requests) {
  for (const auto& r : requests) {
    TROUPE_CHECK(r.sampling.grammar.empty(), "a grammar on the CUDA backend (the gateway refuses them)");
    // Seeds as the CPU executor draws them, so that both backends agree.
    const auto fallback = seed_source_.next();
    state st{r.sampling, rng(r.sampling.seed.value_or(fallback)), {}, {}, nullptr};
    // logit_bias is not in the device kernel: such requests sample on the host too.
    if (r.sampling.logprobs > 0 || !r.sampling.logit_bias.empty()) st.host = std::make_unique<request_sampler>(r.sampling, r.prompt_tokens, fallback);
    if (r.sampling.repetition_penalty != 1.0f) {
      st.prompt_set = r.prompt_tokens;
      std::sort(st.prompt_set.begin(), st.prompt_set.end());
      st.prompt_set.erase(std::unique(st.prompt_set.begin(), st.prompt_set.end()), st.prompt_set.end());
    }
    requests_.insert_or_assign(r.id, std::move(st));
  }
}

void device_samplers::forget(std::span<const request_id> finished) {
  for (const auto id : finished) requests_.erase(id);
}

void device_samplers::prepare(const scheduler_output& step, std::span<const std::int32_t> chunks) {
  rows_.clear();
  step_states_.clear();
  penalty_tokens_.clear();
  penalty_counts_.clear();
  any_on_host_ = false;
  for (const auto ci : chunks) {
    const auto it = requests_.find(step.scheduled[static_cast<std::size_t>(ci)].id);
    TROUPE_CHECK(it != requests_.end(), "sampling a request the executor was never given");
    auto& st = it->second;
    const auto& sp = st.params;
    kernels::sampling_row r;
    r.temperature = sp.temperature;
    r.top_k = sp.top_k;
    r.top_p = sp.top_p;
    r.min_p = sp.min_p;
    r.repetition_penalty = sp.repetition_penalty;
    r.presence_penalty = sp.presence_penalty;
    r.frequency_penalty = sp.frequency_penalty;
    // A draw uses the stream only where the CPU sampler would (not greedy,
    // not on the host); a double just under 1 may round to 1.0f: kept below it.
    r.uniform = !st.host && sp.temperature >= 1e-5f
                    ? std::min(static_cast<float>(st.stream.uniform()), std::nextafter(1.0f, 0.0f))
                    : 0.0f;
    r.penalty_first = static_cast<std::int32_t>(penalty_tokens_.size());
    if (st.penalised()) {
      for (const auto t : st.prompt_set) {
        const auto f = st.output_counts.find(t);
        penalty_tokens_.push_back(t);
        penalty_counts_.push_back(f == st.output_counts.end() ? 0 : f->second);
      }
      for (const auto& [t, n] : st.output_counts)
        if (!std::binary_search(st.prompt_set.begin(), st.prompt_set.end(), t)) {
          penalty_tokens_.push_back(t);
          penalty_counts_.push_back(n);
        }
    }
    r.penalty_count = static_cast<std::int32_t>(penalty_tokens_.size()) - r.penalty_first;
    rows_.push_back(r);
    step_states_.push_back(&st);
    any_on_host_ |= static_cast<bool>(st.host);
  }
}

auto device_samplers::result(std::size_t j, token_id device_token, float device_logprob, std::span<float> logits)
    -> sample_result {
  auto& st = *step_states_.at(j);
  sample_result res;
  if (st.host) {
    res = st.host->sample(logits);
  } else {
    res.token = device_token;
    res.logprob = device_logprob;
  }
  if (st.penalised()) ++st.output_counts[res.token];
  return res;
}

} // namespace troupe::cuda
