#pragma once
// OpenAI's answers as JSON text, without any HTTP: stream chunks, whole
// responses (completions and chat), the usage chunk, errors, the models
// list and /tokenize's answers. openai_protocol.hpp writes a request's
// answer with them.

#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"
#include "service/tools/tool_parser.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::api {

/// {"error":{"message","type","param","code"}}; param and code are null when empty.
auto error_body(const api_error& e) -> std::string;

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

/// One entry of GET /v1/models.
struct model_card {
  std::string id;
  std::int64_t max_model_len = 0;
};

/// GET /v1/models: {"object":"list","data":[{"id":model,"object":"model",
/// "created":created,"owned_by":"troupe","max_model_len":n}, ...]}.
auto models_list(const std::vector<model_card>& models, std::int64_t created) -> std::string;

/// {"count":n,"max_model_len":m,"tokens":[...],"token_strs":null or [...]}.
auto tokenize_response(const std::vector<token_id>& tokens, std::int64_t max_model_len,
                       const std::vector<std::string>* token_strs) -> std::string;
/// {"prompt": text}.
auto detokenize_response(std::string_view text) -> std::string;



} // namespace troupe::api
