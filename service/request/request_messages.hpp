#pragma once
// What a request's session exchanges with the serving actors, as plain
// values: the prompt to encode (text, or chat messages to render) and its
// tokens or why there are none (the tokenizer pool), and a replica's answer
// to a submission.

#include "base/types.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/context_edits.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe::grammar {
class compiled_grammar;
} // namespace troupe::grammar

namespace troupe {

using steady_time = std::chrono::steady_clock::time_point;

/// Text to encode: a completion prompt, or chat messages to render first.
struct encode_job {
  bool chat = false;
  std::string text;                   ///< !chat: the prompt
  std::vector<chat_message> messages; ///< chat
  /// > 0: the most tokens the prompt may have. A long text is counted in
  /// pieces first and not encoded once it is sure to have more (encoded::at_least).
  std::int64_t max_tokens = 0;
  /// Whether the model's BOS opens the tokens; none: the default, yes for a
  /// prompt, no for chat (the template writes what it needs).
  std::optional<bool> add_special_tokens;
  bool add_generation_prompt = true; ///< chat: end with the assistant's opening
  std::string tools_json;            ///< chat: the template's tools (a JSON array), "" for none
  std::string template_kwargs_json;  ///< chat: more template variables (chat_template_kwargs), "" for none
  std::vector<token_id> prompt_tokens; ///< !chat: the prompt as ids (checked against the vocabulary, not encoded)
  /// Structured output's GBNF ("" for none), compiled and its first mask
  /// taken on the tokenizer pool, off the replicas' step loops; with
  /// grammar_after_thinking (a reasoning model's chat), it constrains the
  /// answer after the thinking block (reasoning_parser::grammar_after).
  std::string grammar;
  bool grammar_after_thinking = false;
  /// A harmony (gpt-oss) chat's structured output: the grammar constrains
  /// the final channel's message, after an optional analysis message
  /// (harmony_parser::final_grammar); a tool-call grammar is harmony already.
  bool grammar_in_final_channel = false;
  /// chat: Anthropic's context editing, applied before the prompt is rendered.
  context_edits edits;

  /// About the bytes the job reads: the text, or every message's fields and
  /// what the template writes around each, the tools, variables and grammar (a job's
  /// size picks its share of the tokenizer pool: 20,000 one-letter messages
  /// are a big job).
  auto num_bytes() const -> std::size_t {
    std::size_t n = text.size() + 4 * prompt_tokens.size() + tools_json.size() + template_kwargs_json.size() +
                    grammar.size();
    for (const auto& m : messages)
      n += 16 + m.role.size() + m.content.size() + m.tool_calls_json.size() + m.tool_call_id.size() + m.name.size() +
           m.reasoning_content.size();
    return n;
  }
};

/// The tokens of an encode_job, or why there are none (a 400 for the client).
struct encoded {
  std::vector<token_id> tokens;
  std::string error;
  /// > 0: counting stopped here, past the job's max_tokens; tokens is empty.
  std::int64_t at_least = 0;
  /// chat: the rendered prompt ends inside a thinking block (<think>).
  bool opens_thinking = false;
  bool thinking_done = false; ///< chat: it ends just after a closed thinking block (thinking turned off)
  std::string grammar;       ///< the job's grammar as the replica runs it
  std::string grammar_error; ///< why the grammar is refused (a 400 naming it), "" if it is not
  /// The compiled grammar, held while the request runs: the replica's
  /// executor finds it in the shared cache, compiled.
  std::shared_ptr<grammar::compiled_grammar> compiled;
  std::vector<applied_edit> applied_edits; ///< the job's context edits that cleared something, in order

  /// The prompt's tokens, or at least that many when counting stopped.
  auto num_tokens() const -> std::int64_t {
    return at_least > 0 ? at_least : static_cast<std::int64_t>(tokens.size());
  }
};

/// A scheduler's answer to a submission: 0 when queued, else an HTTP status
/// (400: can never run here; 429: the queue is full) and the reason. A
/// dispatch that found no replica ready says so (and has no status).
struct admission {
  int status = 0;
  std::string message;
  bool no_replica = false;
};

} // namespace troupe
