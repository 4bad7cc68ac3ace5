#pragma once
// OpenAI's requests, without any HTTP: bodies of /v1/completions and
// /v1/chat/completions read into a generation request, and /tokenize and
// /detokenize bodies. openai_format.hpp writes the answers.

#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::api {

/// Parses and validates a request body. `defaults` are the model's defaults
/// (temperature etc.). The first problem found is returned, always status 400:
///  - body not JSON, not an object, trailing text after it: code invalid_json, param "";
///  - a field of the wrong JSON type: invalid_type (booleans must be JSON
///    booleans; an integer field takes a number only when it is whole, so
///    1.5 is invalid_type and 2.0 is 2);
///  - out of range: invalid_value, via sampling_params::validate for the
///    sampling fields; param is the JSON field name ("stop", "top_p");
///  - no prompt / no messages: missing_field; an empty messages array, a batch
///    of prompts, an unknown role, a non-text content part: invalid_value;
///  - n and best_of: 1 to max_choices, best_of >= n; best_of > n only when
///    not streamed; n > 1 not on the WebSocket: invalid_value;
///  - a message without content (absent or null): missing_field, param
///    "messages[i].content"; fields inside messages are named that way.
/// Fields OpenAI defines that troupe does not implement (suffix,
/// response_format but {"type":"text"}, tools, tool_choice, functions,
/// function_call) are refused: code unsupported_parameter.
/// A few optional fields without effect on the answer (metadata, store,
/// service_tier, parallel_tool_calls, prompt_cache_key, safety_identifier) are
/// ignored but must be valid JSON; any other field must be valid JSON and
/// is listed in unknown_fields (the gateway decides). With `ws_message`, "id" and "type" (the WebSocket
/// envelope's) are allowed too. JSON null counts as absent. Role "developer" is taken as "system".
/// Completions' logprobs is an integer 0..20; chat's is a boolean with
/// top_logprobs 0..20 (top_logprobs > 0 without logprobs: true is an error).
/// stream_options is only allowed with stream: true.

[[nodiscard]] auto parse_request(endpoint kind, std::string_view body, const sampling_params& defaults,
                                 bool ws_message = false) -> std::variant<generation_request, api_error>;

/// POST /tokenize, as vLLM has it: a prompt, or chat messages rendered by
/// the model's template first.
struct tokenize_request {
  std::string model;                  ///< "" is the default model
  bool chat = false;                  ///< messages given (else prompt)
  std::string prompt;
  std::vector<chat_message> messages;
  bool add_generation_prompt = true;  ///< chat: end with the assistant's opening
  /// The tokens the model adds around a text (BOS): default true for a
  /// prompt, false for messages (their template writes them).
  bool add_special_tokens = true;
  bool return_token_strs = false;     ///< each id's vocabulary piece too
  /// messages only: the tools the template lists (a JSON array of
  /// {"type": "function", "function": {"name", ...}}), as given; "" for none.
  std::string tools_json;
  std::string template_kwargs_json; ///< messages only: chat_template_kwargs (an object), "" for none
};

/// POST /detokenize: ids back to text.
struct detokenize_request {
  std::string model;
  std::vector<token_id> tokens;
};

/// Reads a /tokenize body: {"prompt": string} or {"messages": [...]} (not
/// both), with model, add_special_tokens, add_generation_prompt (messages
/// only), return_token_strs and tools (messages only). Errors as parse_request's: an unknown field
/// is unknown_parameter.
auto parse_tokenize(std::string_view body) -> std::variant<tokenize_request, api_error>;
/// Reads a /detokenize body: {"tokens": [ids], "model"?}.
auto parse_detokenize(std::string_view body) -> std::variant<detokenize_request, api_error>;

} // namespace troupe::api
