#pragma once
// OpenAI's Responses API (POST /v1/responses), as Codex CLI and the openai
// SDK's `responses.create` speak it, on the same request path as chat
// completions: a body is read into a chat generation_request, and the
// answer is written as a response object or as its stream of typed events
// (response_builder.hpp).

#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::api::responses {

/// What a Responses API request (POST /v1/responses) carries besides its
/// chat request, echoed in the response object or used by the gateway.
struct responses_fields {
  std::string id;                   ///< the response's id ("resp_..."), set by the gateway
  std::string previous_response_id; ///< "" for none: the stored conversation it continues
  bool store = true;                ///< keep the conversation for a later previous_response_id
  bool has_instructions = false;    ///< messages[0] is `instructions` (not carried to the next turn)
  std::string instructions;
  std::string tools_json = "[]";    ///< tools as given (the Responses shape)
  std::string tool_choice_json = "\"auto\"";
  std::string format_json = R"({"type":"text"})"; ///< text.format as given
  std::string metadata_json = "{}";
  std::string reasoning_effort;     ///< reasoning.effort as given, "" for none
  std::string reasoning_summary;    ///< reasoning.summary as given, "" for none
  /// include: ["reasoning.encrypted_content"]: reasoning items carry encrypted_content.
  bool include_encrypted = false;
  std::vector<std::string> namespaces; ///< namespace tools: a call named "ns.f" is f in ns
};

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
/// `fields` gets what the request carries besides its generation request.
[[nodiscard]] auto parse_request(std::string_view body, const sampling_params& defaults, responses_fields& fields)
    -> std::variant<generation_request, api_error>;
/// The same, its own fields not kept.
[[nodiscard]] inline auto parse_request(std::string_view body, const sampling_params& defaults)
    -> std::variant<generation_request, api_error> {
  responses_fields ignored;
  return parse_request(body, defaults, ignored);
}

} // namespace troupe::api::responses
