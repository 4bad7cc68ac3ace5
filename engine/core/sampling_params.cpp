#include "engine/core/sampling_params.hpp"

#include "base/json_text.hpp"


#include <cmath>
#include <cstdio>

namespace troupe {

namespace {

auto show(double v) -> std::string { return json_text::show_number(v); }

auto show(std::int32_t v) -> std::string { return std::to_string(v); }

} // namespace

// Ranges follow vLLM's SamplingParams._verify_args and the OpenAI API. The
// comparisons are written so that NaN fails them.
auto sampling_params::validate() const -> std::string {
  if (!(temperature >= 0.0f) || std::isinf(temperature))
    return "temperature must be >= 0 and finite, got " + show(temperature);
  if (top_k < -1) return "top_k must be -1, 0 or >= 1, got " + show(top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return "top_p must be in (0, 1], got " + show(top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return "min_p must be in [0, 1], got " + show(min_p);
  if (!(repetition_penalty > 0.0f) || std::isinf(repetition_penalty))
    return "repetition_penalty must be > 0 and finite, got " + show(repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return "presence_penalty must be in [-2, 2], got " + show(presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return "frequency_penalty must be in [-2, 2], got " + show(frequency_penalty);
  if (max_tokens < 1) return "max_tokens must be >= 1, got " + show(max_tokens);
  if (logprobs < -1 || logprobs > 20)
    return "logprobs must be in [-1, 20], got " + show(logprobs);
  if (prompt_logprobs < -1 || prompt_logprobs > 20)
    return "prompt_logprobs must be in [-1, 20], got " + show(prompt_logprobs);
  for (std::size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty()) return "stop[" + std::to_string(i) + "] must not be empty";
  for (std::size_t i = 0; i < stop_token_ids.size(); ++i)
    if (stop_token_ids[i] < 0)
      return "stop_token_ids[" + std::to_string(i) + "] must be >= 0, got " +
             show(stop_token_ids[i]);
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return "logit_bias must map token ids >= 0, got " + show(id);
    if (!(bias >= -100.0f && bias <= 100.0f))
      return "logit_bias must map to biases in [-100, 100], got " + show(bias) + " for token " + show(id);
  }
  if (thinking_budget < -1) return "thinking_budget must be >= 0, got " + show(thinking_budget);
  return "";
}

} // namespace troupe
