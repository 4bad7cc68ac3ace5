#include "service/request/admission.hpp"

#include "service/http/request_checks.hpp"

#include <string>

namespace troupe {

auto check_before_encoding(api::completion_request& body, const api::request_support& s)
    -> std::optional<api::api_error> {
  return api::check_request(body, s);
}

auto check_encoded(const api::completion_request& body, const model_profile& model, std::int32_t max_input_tokens,
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
