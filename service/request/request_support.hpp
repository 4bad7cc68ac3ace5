#pragma once
// What the serving backend and model can do, which check_request
// (request_checks.hpp) holds a request against; kept apart so that the
// actors' serving_context need not include the request API.

#include <string>

namespace troupe::api {

struct request_support {
  bool prompt_logprobs = true; ///< the backend scores prompts (echo with logprobs)
  bool grammars = true;        ///< its sampler applies masks: grammars, forced tool calls, thinking budgets
  bool reasoning = false;      ///< the model thinks in <think> blocks
  std::string tool_parser;     ///< the tool-call format its answers are parsed for; "": none known
};

} // namespace troupe::api
