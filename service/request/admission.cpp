#include "service/request/admission.hpp"

#include "engine/grammar/grammar.hpp"
#include "service/tools/tool_grammar.hpp"

#include <string>

namespace troupe {

using namespace api;

namespace {

auto error(std::string code, std::string param, std::string message) -> api_error {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

auto check_thinking_budget(generation_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.sampling.thinking_budget < 0) return std::nullopt;
  const auto& param = body.thinking_param;
  if (!s.reasoning || body.kind != endpoint::chat) {
    if (body.thinking_implied) {
      body.sampling.thinking_budget = -1;
      return std::nullopt;
    }
    return error("invalid_value", param,
                 "thinking_token_budget needs a model that thinks (its chat template has no <think> block; "
                 "see model.reasoning_parser)");
  }
  if (!s.grammars)
    return error("unsupported_parameter", param, param + ": a thinking budget runs on the CPU backend only");
  return std::nullopt;
}

auto prepare_tools(generation_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.choice.what == tool_choice::mode::none) return std::nullopt;
  if (s.tool_parser.empty())
    return error("unsupported_parameter", "tools",
                 "tools: this model's chat template writes no tool-call format troupe knows; set model.tool_parser ("
                 "hermes, llama3_json, mistral or harmony)");
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

auto check_before_encoding(generation_request& body, const request_support& s) -> std::optional<api_error> {
  if (body.echo && body.want_logprobs && !s.prompt_logprobs)
    return error("unsupported_parameter", "echo",
                 "echo with logprobs is not supported on this backend (it computes no prompt logprobs)");
  if (!body.sampling.grammar.empty() && !s.grammars)
    return error("unsupported_parameter", "response_format",
                 "structured output (response_format, guided_*) runs on the CPU backend only");
  if (auto why = check_thinking_budget(body, s)) return why;
  return prepare_tools(body, s);
}

auto check_encoded(const api::generation_request& body, const model_profile& model, std::int32_t max_input_tokens,
                   const encoded& e) -> std::optional<api::api_error> {
  const auto refuse = [](std::string message, std::string param, std::string code = {}) {
    return api::api_error{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
  };
  if (!e.grammar_error.empty()) {
    const bool tools = body.choice.what == api::tool_choice::mode::required ||
                       body.choice.what == api::tool_choice::mode::named;
    return refuse(e.grammar_error, tools ? "tools" : "response_format");
  }
  for (const auto& [t, bias] : body.sampling.logit_bias)
    if (t >= model.tok->vocab_size())
      return refuse("logit_bias names token " + std::to_string(t) + ", outside the vocabulary (" +
                        std::to_string(model.tok->vocab_size()) + " tokens)",
                    "logit_bias", "invalid_value");
  const auto n = e.num_tokens();
  const char* prompt = body.kind == api::endpoint::chat ? "messages" : "prompt";
  // (A prompt the tokenizer stopped counting has at least e.at_least tokens.)
  const std::string has = e.at_least > 0 ? "the prompt has at least " : "the prompt has ";
  if (max_input_tokens > 0 && n > max_input_tokens)
    return refuse(has + std::to_string(n) + " tokens; the tenant's limit (max_input_tokens) is " +
                      std::to_string(max_input_tokens),
                  prompt, "input_tokens_exceeded");
  if (n >= model.max_model_len)
    return refuse(has + std::to_string(n) + " tokens; the model's context is " +
                      std::to_string(model.max_model_len) + " tokens",
                  prompt);
  return std::nullopt;
}

} // namespace troupe
