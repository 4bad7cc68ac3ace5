#pragma once
// The OpenAI wire format, without any HTTP: request bodies of /v1/completions
// and /v1/chat/completions parsed into a plain struct, responses, stream
// chunks and errors written as JSON text.

#include "engine/core/sampling_params.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/context_edits.hpp"
#include "base/types.hpp"
#include "service/http/api_error.hpp"
#include "service/tools/tool_parser.hpp"
#include "service/tools/tool_spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::api {

enum class endpoint { completions, chat }; ///< /v1/completions, /v1/chat/completions


/// The API a request came through, which its answer and errors speak:
/// OpenAI's (/v1/completions, /v1/chat/completions), Anthropic's Messages
/// API (/v1/messages, read into a chat request by anthropic_api.hpp) or
/// OpenAI's Responses API (/v1/responses, responses_api.hpp).
enum class wire { openai, anthropic, responses };

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

/// What a Messages API request (POST /v1/messages) carries besides its chat
/// request.
struct anthropic_fields {
  bool omit_thinking = false; ///< thinking.display "omitted": thinking blocks carry no text, only their signature
  context_edits edits;        ///< context_management's edits
  /// Tools with defer_loading (offered once a tool_reference names them),
  /// and the names tool_result blocks reference.
  std::vector<std::string> deferred_tools, referenced_tools;
};

/// One request, validated. Exactly one of prompt / prompt_tokens / messages
/// carries the input: prompt or prompt_tokens for completions, messages for chat.
struct completion_request {
  endpoint kind = endpoint::completions;
  api::wire wire = api::wire::openai;
  std::string model;                  ///< "" when absent
  std::string prompt;                 ///< completions: the text (maybe empty)
  std::vector<token_id> prompt_tokens; ///< completions: token ids given instead of text
  std::vector<chat_message> messages; ///< chat: at least one; role system, user or assistant
  /// Starts from parse_request's `defaults`; max_tokens is set only when the
  /// request gives one, and logprobs is top_logprobs when want_logprobs, else
  /// as in defaults.
  sampling_params sampling;
  std::optional<std::int32_t> max_tokens; ///< max_completion_tokens, else max_tokens; >= 1
  bool stream = false;
  bool include_usage = false;         ///< stream_options.include_usage
  std::string user;
  std::int32_t priority = 0;
  std::int32_t top_logprobs = 0;      ///< alternatives asked for per token, 0..20
  bool want_logprobs = false;         ///< completions: logprobs given; chat: logprobs true
  bool echo = false;                  ///< completions: the prompt's text opens the answer
  /// chat: the tools as given (a JSON array, for the template), "" for none;
  /// their functions; tool_choice (absent: auto with tools, none without)
  /// and parallel_tool_calls.
  std::string tools_json;
  std::string template_kwargs_json; ///< chat: chat_template_kwargs as given (an object), "" for none
  std::vector<tool_spec> tools;
  tool_choice choice;
  bool parallel_tool_calls = true;
  /// Choices returned (n), and completions generated to pick them from
  /// (best_of, completions only: the n with the highest mean token logprob).
  std::int32_t n = 1;
  std::int32_t best_of = 1;
  responses_fields responses; ///< wire responses only
  anthropic_fields anthropic; ///< wire anthropic only
  /// The client's own key for its session (prompt_cache_key): the session
  /// affinity routes by it when no session header is given.
  std::string cache_key;
  /// Hosted tools given (web_search...), which cannot run here: not offered
  /// to the model, and named in a response header.
  std::vector<std::string> skipped_tools;
  /// Top-level fields in nobody's table (docs/api.md), in order: the
  /// gateway accepts them, visibly, or refuses the first
  /// (server.unknown_fields).
  std::vector<std::string> unknown_fields;
};

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
/// The most choices (n, best_of) one request may ask for.
constexpr std::int32_t max_choices = 128;

[[nodiscard]] auto parse_request(endpoint kind, std::string_view body, const sampling_params& defaults,
                                 bool ws_message = false) -> std::variant<completion_request, api_error>;

struct usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  /// Of the prompt's tokens: those found in the prefix cache (OpenAI's
  /// cached_tokens, Anthropic's cache_read_input_tokens), and those it wrote
  /// there, its new full blocks (Anthropic's cache_creation_input_tokens).
  std::int64_t cached_tokens = 0;
  std::int64_t cache_written_tokens = 0;
};

/// One sampled token and what the model thought of it.
struct token_logprob {
  /// Its bytes in the text (a byte piece's one byte, maybe not UTF-8 alone).
  /// It prints as text when it is UTF-8, else as OpenAI prints a token that
  /// ends mid-character: "bytes:\\xe4" (each byte but printable ASCII as
  /// \\xNN); chat's "bytes" are these bytes.
  std::string token;
  float logprob = 0; ///< below -9999 (or -inf, NaN) prints as -9999.0, as vLLM does
  std::vector<std::pair<std::string, float>> top; ///< alternatives (bytes as token), most likely first
  bool none = false; ///< no logprob (null): an echoed prompt's first token, which has no context
};

/// The fields every response object repeats.
struct response_head {
  std::string id;
  std::int64_t created = 0; ///< Unix seconds
  std::string model;
  std::int32_t index = 0; ///< the choice's index (n > 1: 0 to n - 1)
};

/// One streamed chunk, JSON text without "data: ". Completions: object
/// "text_completion", choices[0].text. Chat: object "chat.completion.chunk",
/// choices[0].delta = {"role":"assistant" (only when `first`), "content": text}.
/// finish_reason "" is JSON null. logprobs null or empty prints "logprobs": null;
/// else completions get {"tokens","token_logprobs","top_logprobs":[{text:lp}],
/// "text_offset"} with offsets in Unicode code points counted from
/// text_offset0 (as OpenAI and vLLM count; a token that starts inside a
/// character, a byte piece, points at that character), chat gets {"content":[{"token",
/// "logprob","bytes":[UTF-8 byte values],"top_logprobs":[{"token","logprob","bytes"}]}]}.
/// With include_usage every chunk carries "usage": null, as OpenAI does.
auto stream_chunk(endpoint kind, const response_head& h, std::string_view text,
                  std::string_view finish_reason, const std::vector<token_logprob>* logprobs,
                  std::int64_t text_offset0, bool first, bool include_usage) -> std::string;

/// A chat chunk whose delta carries more than plain text: "content" (when
/// non-empty), "reasoning_content" (when non-empty) and "tool_calls" (each
/// call's first delta {"index", "id", "type": "function", "function":
/// {"name", "arguments": ""}}, later ones {"index", "function":
/// {"arguments": fragment}}), as OpenAI and vLLM stream them.
auto chat_delta_chunk(const response_head& h, std::string_view content, std::string_view reasoning,
                      const std::vector<tools::call_delta>& calls, bool include_usage) -> std::string;

/// The non-streamed chat body with a message of content (null when empty
/// and there are calls), reasoning_content (when non-empty) and tool_calls
/// (when any: {"id", "type": "function", "function": {"name", "arguments"}}).
auto chat_response(const response_head& h, std::string_view content, std::string_view reasoning,
                   const std::vector<tools::tool_call>& calls, std::string_view finish_reason,
                   const std::vector<token_logprob>* logprobs, const usage& u) -> std::string;

/// One response of n choices from n whole responses of one choice each
/// (full_response or chat_response, each with its own index): the first's
/// head, every choice in the order given, and `u` as the usage.
auto combine_choices(const std::vector<std::string>& responses, const usage& u) -> std::string;

/// The last chunk when stream_options.include_usage: "choices": [] and
/// "usage": {"prompt_tokens","completion_tokens","total_tokens"}.
auto usage_chunk(endpoint kind, const response_head& h, const usage& u) -> std::string;

/// The non-streamed body: "text_completion" (choices[0]: index, text, logprobs,
/// finish_reason) or "chat.completion" (choices[0]: index, message {role
/// "assistant", content}, logprobs, finish_reason), then usage. logprobs and
/// finish_reason print as in stream_chunk, text offsets from 0.
auto full_response(endpoint kind, const response_head& h, std::string_view text,
                   std::string_view finish_reason, const std::vector<token_logprob>* logprobs,
                   const usage& u) -> std::string;

/// A WebSocket message's envelope (GET /v1/chat/stream): its type and id;
/// a chat request's other fields are read by parse_request(chat, ...).
struct ws_envelope {
  std::string type;    ///< "chat" (the default), "cancel", "ping", "auth"
  std::string id_json; ///< the id as JSON text (a string or an integer); "" when absent
  std::string api_key; ///< "auth"
};

/// Reads type, id and api_key; other fields are left for parse_request.
/// Errors (status 400): not a JSON object, an id that is not a string or an
/// integer, an unknown type.
[[nodiscard]] auto parse_ws_envelope(std::string_view text) -> std::variant<ws_envelope, api_error>;

/// A WebSocket error event: {"type":"error","id":ID (null when ""),
/// "status":S[,more],"error":{...}}, from an error_body() text; `more` is
/// extra fields ("\"retry_after_s\":1") or "".
auto ws_error_event(std::string_view id_json, int status, std::string_view error_body, std::string_view more = {})
    -> std::string;

/// One entry of GET /v1/models.
struct model_card {
  std::string id;
  std::int64_t max_model_len = 0;
};

/// GET /v1/models: {"object":"list","data":[{"id":model,"object":"model",
/// "created":created,"owned_by":"troupe","max_model_len":n}, ...]}.
auto models_list(const std::vector<model_card>& models, std::int64_t created) -> std::string;

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

/// {"count":n,"max_model_len":m,"tokens":[...],"token_strs":null or [...]}.
auto tokenize_response(const std::vector<token_id>& tokens, std::int64_t max_model_len,
                       const std::vector<std::string>* token_strs) -> std::string;
/// {"prompt": text}.
auto detokenize_response(std::string_view text) -> std::string;



} // namespace troupe::api
