#pragma once
// Anthropic's Messages API (POST /v1/messages), as Claude Code and the
// @anthropic-ai/sdk speak it, on the same request path as chat completions:
// a body is read into a chat generation_request, and the answer is written
// as a message or as its event stream (anthropic_protocol.hpp).

#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"
#include "service/http/reasoning_seal.hpp"
#include "service/tools/tool_parser.hpp"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::api::anthropic {

/// Reads a Messages body: model, max_tokens (required), messages (user and
/// assistant; content a string or text, tool_use, tool_result and thinking
/// blocks), system (a string or text blocks), stop_sequences, stream,
/// temperature, top_p, top_k, tools ({name, description, input_schema}),
/// tool_choice ({type: auto | any | tool | none, name,
/// disable_parallel_tool_use}), metadata.user_id, thinking ({type: enabled |
/// disabled}: disabled turns the template's thinking off). As a chat request:
/// system first, a user's tool_result blocks as tool messages, an
/// assistant's tool_use blocks as its tool_calls and thinking as its
/// reasoning. Errors are 400s (error_body gives Anthropic's shape); an
/// image or document block is refused by name.
/// `options`: where the answer's own settings go (none: not kept).
/// `counting`: POST /v1/messages/count_tokens's body, where max_tokens is not needed.
struct message_options {
  bool omit_thinking = false; ///< thinking.display "omitted": thinking blocks carry no text, only their signature
};
[[nodiscard]] auto parse_request(std::string_view body, const sampling_params& defaults,
                                 message_options* options = nullptr, bool counting = false)
    -> std::variant<generation_request, api_error>;

/// {"type":"error","error":{"type","message"}}: Anthropic's error body.
auto error_body(const api_error& e) -> std::string;

/// Anthropic's stop_reason for troupe's finish reason: end_turn, max_tokens,
/// stop_sequence (a stop string matched), tool_use.
auto stop_reason(std::string_view finish_reason, bool stop_string) -> std::string_view;

/// A tool_use block's input: the arguments when they are a JSON object, else {}.
auto tool_input(std::string_view arguments) -> std::string;

/// How a message writes its thinking and what follows the usage: the text
/// left out (thinking.display "omitted"), the signature sealed with the
/// server's key (none: ""), and context_management's applied_edits (when
/// the request gave context_management).
struct thinking_output {
  bool omit = false;
  const reasoning_seal* seal = nullptr;
  const std::vector<applied_edit>* edits = nullptr;
};

/// {"applied_edits": [{"type", "cleared_thinking_turns" | "cleared_tool_uses", "cleared_input_tokens"}]}.
auto applied_edits_json(const std::vector<applied_edit>& edits) -> std::string;

/// The whole message: {"id","type":"message","role":"assistant","model",
/// "content":[thinking?, text?, tool_use...],"stop_reason","stop_sequence",
/// "usage":{"input_tokens","output_tokens"}}.
auto message(const response_head& h, std::string_view text, std::string_view reasoning,
             const std::vector<tools::tool_call>& calls, std::string_view finish_reason, std::string_view stop_sequence,
             const usage& u, const thinking_output& t = {}) -> std::string;

/// Anthropic's usage object: input_tokens (neither read from the prefix cache
/// nor written to it), cache_creation_input_tokens, cache_read_input_tokens,
/// and output_tokens when `with_output`.
auto usage_json(const usage& u, bool with_output) -> std::string;

/// Anthropic's call ids ("toolu_" and 24 characters) from troupe's ("call_...").
auto tool_use_id(std::string_view call_id) -> std::string;

} // namespace troupe::api::anthropic
