#pragma once
// CAF 0.17 inspect() overloads for the messages that cross the network
// between a router node and its workers (actors/wire.hpp). Only what a
// submission needs travels: a request's local bookkeeping (its KV entry,
// matched blocks, swap blocks) never leaves its process.

#include "actors/messages.hpp"
#include "engine/core/batch_scheduler.hpp"
#include "engine/core/router_core.hpp"

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include <optional>

namespace troupe {

template <class Inspector>
auto inspect(Inspector& f, token_logprob& x) -> typename Inspector::result_type {
  return f(caf::meta::type_name("token_logprob"), x.token, x.logprob);
}

template <class Inspector>
auto inspect(Inspector& f, sample_result& x) -> typename Inspector::result_type {
  return f(caf::meta::type_name("sample_result"), x.token, x.logprob, x.top_logprobs, x.forced);
}

template <class Inspector>
auto inspect(Inspector& f, sampling_params& x) -> typename Inspector::result_type {
  bool has_seed = x.seed.has_value();
  std::uint64_t seed = x.seed.value_or(0);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x.seed = has_seed ? std::optional<std::uint64_t>(seed) : std::nullopt;
    return caf::none;
  });
  return f(caf::meta::type_name("sampling_params"), x.temperature, x.top_k, x.top_p, x.min_p, x.repetition_penalty,
           x.presence_penalty, x.frequency_penalty, has_seed, seed, x.max_tokens, x.stop_token_ids, x.stop, x.ignore_eos,
           x.logprobs, x.prompt_logprobs, x.logit_bias, x.grammar, x.thinking_budget, x.thinking_open,
           x.thinking_close, x.thinking_opened, load);
}

/// A submission: the fields a scheduler reads of a new request.
template <class Inspector>
auto inspect(Inspector& f, request& x) -> typename Inspector::result_type {
  return f(caf::meta::type_name("request"), x.id, x.prompt, x.sampling, x.tenant, x.account, x.weight, x.priority,
           x.output_len_hint, x.group, x.choice);
}

template <class Inspector>
auto inspect(Inspector& f, request_update& x) -> typename Inspector::result_type {
  bool has = x.token.has_value();
  sample_result s = has ? *x.token : sample_result{};
  auto reason = static_cast<std::uint8_t>(x.finished);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x.token = has ? std::optional<sample_result>(std::move(s)) : std::nullopt;
    x.finished = static_cast<finish_reason>(reason);
    return caf::none;
  });
  return f(caf::meta::type_name("request_update"), x.id, has, s, reason, x.prompt_logprobs, x.num_cached_tokens,
           x.num_cache_written_tokens, load);
}

template <class Inspector>
auto inspect(Inspector& f, admission& x) -> typename Inspector::result_type {
  return f(caf::meta::type_name("admission"), x.status, x.message);
}

template <class Inspector>
auto inspect(Inspector& f, replica_report& x) -> typename Inspector::result_type {
  return f(caf::meta::type_name("replica_report"), x.running, x.waiting, x.prefill_tokens, x.decode_tokens, x.kv_use,
           x.submitted, x.submitted_tokens, x.queue_age_s, x.swapped, x.num_preemptions, x.num_swap_outs,
           x.forked_tokens, x.jump_forward_tokens, x.steps);
}

} // namespace troupe
