#pragma once
// OpenAI's Responses API (POST /v1/responses), as Codex CLI and the openai
// SDK's `responses.create` speak it, on the same request path as chat
// completions: a body is read into a chat completion_request (wire
// responses), and the answer is written as a response object or as its
// stream of typed events (response_builder.hpp).

#include "service/http/openai_api.hpp"

#include <string>
#include <string_view>
#include <variant>

namespace troupe::api::responses {

/// Reads a Responses body: model, input (required: a string, or an array of
/// items: messages {role user | assistant | system | developer, content a
/// string or input_text / output_text parts}, function_call {call_id, name,
/// arguments}, function_call_output {call_id, output} and reasoning
/// {content or summary texts}), instructions, max_output_tokens,
/// temperature, top_p, stream, store, previous_response_id, tools ({type:
/// "function", name, description, parameters, strict}), tool_choice,
/// parallel_tool_calls, text.format (text, json_object, json_schema),
/// reasoning.effort ("none" or "minimal" turns the template's thinking off;
/// low, medium and high set a thinking budget of 1,024, 2,048, 8,192 tokens),
/// metadata, user. As a chat request: instructions first (a system
/// message), an assistant's function calls as its tool_calls, outputs as
/// tool messages. Errors are 400s in OpenAI's shape; images, files, built-in
/// tools (web_search...) and background are refused by name.
[[nodiscard]] auto parse_request(std::string_view body, const sampling_params& defaults)
    -> std::variant<completion_request, api_error>;

} // namespace troupe::api::responses
