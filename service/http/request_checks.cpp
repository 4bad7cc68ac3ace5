#include "service/http/request_checks.hpp"

#include "engine/grammar/grammar.hpp"
#include "service/http/json_reader.hpp"
#include "service/tools/tool_grammar.hpp"

namespace troupe::api {

namespace {

using json_reader::error;

auto check_thinking_budget(completion_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.sampling.thinking_budget < 0) return std::nullopt;
  const char* param = body.wire == wire::anthropic   ? "thinking.budget_tokens"
                      : body.wire == wire::responses ? "reasoning.effort"
                                                     : "thinking_token_budget";
  if (!s.reasoning || body.kind != endpoint::chat) {
    if (body.wire != wire::openai) {
      body.sampling.thinking_budget = -1;
      return std::nullopt;
    }
    return error("invalid_value", param,
                 "thinking_token_budget needs a model that thinks (its chat template has no <think> block; "
                 "see model.reasoning_parser)");
  }
  if (!s.grammars)
    return error("unsupported_parameter", param, std::string(param) + ": a thinking budget runs on the CPU backend only");
  return std::nullopt;
}

auto prepare_tools(completion_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.choice.what == tool_choice::mode::none) return std::nullopt;
  if (s.tool_parser.empty())
    return error("unsupported_parameter", "tools",
                 "tools: this model's chat template writes no tool-call format troupe knows; set model.tool_parser ("
                 "hermes, llama3_json or mistral)");
  if (body.choice.what == tool_choice::mode::automatic) return std::nullopt;
  if (!body.sampling.grammar.empty())
    return error("invalid_value", "tool_choice",
                 "tool_choice requires a call and response_format (or guided_*) constrains the answer too; give one");
  if (!s.grammars)
    return error("unsupported_parameter", "tool_choice",
                 "tool_choice \"required\" or a named function runs on the CPU backend only");
  try {
    body.sampling.grammar = tools::tool_call_grammar(s.tool_parser, body.tools, body.choice, body.parallel_tool_calls);
    (void)grammar::parse_gbnf(body.sampling.grammar);
  } catch (const grammar::grammar_error& e) {
    return error("invalid_value", "tools", e.what());
  }
  return std::nullopt;
}

} // namespace

auto check_request(completion_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.echo && body.want_logprobs && !s.prompt_logprobs)
    return error("unsupported_parameter", "echo",
                 "echo with logprobs is not supported on this backend (it computes no prompt logprobs)");
  if (!body.sampling.grammar.empty() && !s.grammars)
    return error("unsupported_parameter", "response_format",
                 "structured output (response_format, guided_*) runs on the CPU backend only");
  if (auto why = check_thinking_budget(body, s)) return why;
  return prepare_tools(body, s);
}

} // namespace troupe::api
