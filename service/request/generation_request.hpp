#pragma once
// One generation request as every wire protocol reads it: the input (a
// prompt, token ids or chat messages), sampling, tools, choices and the
// prompt's edits, with nothing of the protocol it came through. The
// protocols' parsers (service/http/openai, anthropic, responses, websocket)
// fill it; the session runs it; each protocol's encoder writes its answer.
// Also the answer's neutral figures: its usage, a token's logprobs and the
// fields every response repeats.

#include "base/types.hpp"
#include "engine/core/sampling_params.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/context_edits.hpp"
#include "service/tools/tool_spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::api {

/// The input's shape: a prompt (completions) or chat messages (chat, which
/// the Messages and Responses APIs read into too).
enum class endpoint { completions, chat };

/// The most choices (n, best_of) one request may ask for.
constexpr std::int32_t max_choices = 128;

/// One request, validated. Exactly one of prompt / prompt_tokens / messages
/// carries the input: prompt or prompt_tokens for completions, messages for chat.
struct generation_request {
  endpoint kind = endpoint::completions;
  std::string model;                  ///< "" when absent
  std::string prompt;                 ///< completions: the text (maybe empty)
  std::vector<token_id> prompt_tokens; ///< completions: token ids given instead of text
  std::vector<chat_message> messages; ///< chat: at least one; role system, user or assistant
  /// Starts from the parser's `defaults`; max_tokens is set only when the
  /// request gives one, and logprobs is top_logprobs when want_logprobs, else
  /// as in defaults.
  sampling_params sampling;
  std::optional<std::int32_t> max_tokens; ///< max_completion_tokens, else max_tokens; >= 1
  /// The field that set sampling.thinking_budget, which its errors name, and
  /// how: asked for by name (OpenAI's thinking_token_budget: refused where it
  /// cannot act) or implied by a protocol's thinking or effort setting
  /// (dropped where the model does not think).
  std::string thinking_param = "thinking_token_budget";
  bool thinking_implied = false;
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
  /// The prompt's edits before it is rendered (Anthropic's
  /// context_management), tools offered only once a tool_reference names
  /// them (defer_loading), and the names tool_result blocks reference.
  context_edits edits;
  std::vector<std::string> deferred_tools, referenced_tools;
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

} // namespace troupe::api
