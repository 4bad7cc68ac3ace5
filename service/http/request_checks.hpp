#pragma once
// What a request must pass before it is encoded, beyond its own fields:
// what this backend and model can do with it. Plain C++, like openai_api.hpp.

#include "service/http/openai_api.hpp"
#include "service/http/request_support.hpp"

#include <optional>

namespace troupe::api {

/// The 400 a request gets here, if any; may rewrite `body` as it passes:
///  - echo with logprobs, or structured output, where the backend cannot;
///  - a thinking budget needs a model that thinks and the CPU sampler. Asked
///    for by name (chat's thinking_token_budget) it is refused elsewhere;
///    implied by the Messages API's thinking or the Responses API's
///    reasoning.effort, a model that does not think drops it, as it ignores
///    the rest of those settings;
///  - tools need a model with a tool-call format; a call that tool_choice
///    requires is then enforced by a grammar in that format (set here in
///    body.sampling.grammar), which cannot be combined with response_format.
auto check_request(completion_request& body, const request_support& s) -> std::optional<api_error>;

} // namespace troupe::api
