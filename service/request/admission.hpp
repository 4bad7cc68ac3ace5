#pragma once
// Every check a request passes between its parsed body and its submission,
// in one place: what this backend and model can do with it (before it is
// encoded), then its encoded prompt against the model's vocabulary and
// context and the tenant's max_input_tokens. (The body's own fields are
// checked as they are parsed; the tenant's model, rate limits and
// max_tokens at the gateway, before the body reaches a model.)

#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"
#include "service/request/model_profile.hpp"
#include "service/request/request_support.hpp"
#include "service/request/request_messages.hpp"

#include <cstdint>
#include <optional>

namespace troupe {

/// The 400 a request gets before it is encoded, if any; may rewrite `body`
/// as it passes:
///  - echo with logprobs, or structured output, where the backend cannot;
///  - a thinking budget needs a model that thinks and the CPU sampler. Asked
///    for by name (chat's thinking_token_budget) it is refused elsewhere;
///    implied (the Messages API's thinking, the Responses API's
///    reasoning.effort), a model that does not think drops it, as it
///    ignores the rest of those settings; the error names body.thinking_param;
///  - tools need a model with a tool-call format; a call that tool_choice
///    requires is then enforced by a grammar in that format (set here in
///    body.sampling.grammar), which cannot be combined with response_format.
auto check_before_encoding(api::generation_request& body, const api::request_support& s)
    -> std::optional<api::api_error>;

/// The 400 an encoded prompt gets, if any, in this order: the grammar
/// refused (param tools for a forced call, else response_format), a
/// logit_bias token outside the vocabulary, over the tenant's
/// max_input_tokens (> 0; code input_tokens_exceeded), at or over the
/// model's context. A prompt whose count stopped has "at least" its tokens.
auto check_encoded(const api::generation_request& body, const model_profile& model, std::int32_t max_input_tokens,
                   const encoded& e) -> std::optional<api::api_error>;

} // namespace troupe
