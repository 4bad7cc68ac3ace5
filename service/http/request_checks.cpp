#include "service/http/request_checks.hpp"

#include "engine/grammar/grammar.hpp"
#include "service/tools/tool_grammar.hpp"

namespace troupe::api {

namespace {

auto refuse(std::string message, std::string param, std::string code) -> api_error {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

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
    return refuse("thinking_token_budget needs a model that thinks (its chat template has no <think> block; "
                  "see model.reasoning_parser)", param, "invalid_value");
  }
  if (!s.grammars)
    return refuse(std::string(param) + ": a thinking budget runs on the CPU backend only", param,
                  "unsupported_parameter");
  return std::nullopt;
}

auto prepare_tools(completion_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.choice.what == tool_choice::mode::none) return std::nullopt;
  if (s.tool_parser.empty())
    return refuse("tools: this model's chat template writes no tool-call format troupe knows; set model.tool_parser ("
                  "hermes, llama3_json or mistral)", "tools", "unsupported_parameter");
  if (body.choice.what == tool_choice::mode::automatic) return std::nullopt;
  if (!body.sampling.grammar.empty())
    return refuse("tool_choice requires a call and response_format (or guided_*) constrains the answer too; give one",
                  "tool_choice", "invalid_value");
  if (!s.grammars)
    return refuse("tool_choice \"required\" or a named function runs on the CPU backend only", "tool_choice",
                  "unsupported_parameter");
  try {
    body.sampling.grammar = tools::tool_call_grammar(s.tool_parser, body.tools, body.choice, body.parallel_tool_calls);
    (void)grammar::parse_gbnf(body.sampling.grammar);
  } catch (const grammar::grammar_error& e) {
    return refuse(e.what(), "tools", "invalid_value");
  }
  return std::nullopt;
}

} // namespace

auto check_request(completion_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.echo && body.want_logprobs && !s.prompt_logprobs)
    return refuse("echo with logprobs is not supported on this backend (it computes no prompt logprobs)", "echo",
                  "unsupported_parameter");
  if (!body.sampling.grammar.empty() && !s.grammars)
    return refuse("structured output (response_format, guided_*) runs on the CPU backend only", "response_format",
                  "unsupported_parameter");
  if (auto why = check_thinking_budget(body, s)) return why;
  return prepare_tools(body, s);
}

} // namespace troupe::api
