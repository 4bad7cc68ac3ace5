#pragma once
// A choice's answer as every wire protocol gets it: a stream of neutral
// events (text with its logprobs, reasoning, a tool call's start and its
// arguments), then how it finished and what it used. The text assembler
// makes them; each protocol's encoder writes them.

#include "service/request/generation_request.hpp"
#include "service/tools/tool_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <span>
#include <string_view>
#include <vector>

namespace troupe {

struct output_event {
  enum class kind : std::uint8_t {
    text,          ///< answer text (maybe empty, carrying logprobs alone)
    reasoning,     ///< the model's reasoning
    call_start,    ///< a tool call begins: its id, its name, and the first of its arguments (maybe "")
    call_arguments ///< more of a call's arguments
  };
  kind what = kind::text;
  std::string text; ///< the text, the reasoning, or a fragment of the call's arguments
  std::vector<api::token_logprob> logprobs; ///< text: its tokens', when asked
  std::size_t call = 0;       ///< call_*: the call's index in the answer
  std::string call_id, name;  ///< call_start
};

/// The call events of a group as the tool parser gave them, one delta each
/// (a start carries the id, the name and the arguments' first fragment).
inline auto call_deltas(std::span<const output_event> events) -> std::vector<tools::call_delta> {
  std::vector<tools::call_delta> out;
  for (const auto& e : events)
    if (e.what == output_event::kind::call_start || e.what == output_event::kind::call_arguments)
      out.push_back({e.call, e.call_id, e.name, e.text});
  return out;
}

/// A choice's answer kept whole, for a protocol's non-streamed response:
/// its text and logprobs, its reasoning, and its calls merged.
struct whole_answer {
  std::string text, reasoning;
  std::vector<api::token_logprob> logprobs;
  std::vector<tools::tool_call> calls;
  void add(std::span<const output_event> events) {
    for (const auto& e : events) {
      if (e.what == output_event::kind::text) {
        text += e.text;
        logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      } else if (e.what == output_event::kind::reasoning) {
        reasoning += e.text;
      }
    }
    if (auto deltas = call_deltas(events); !deltas.empty()) {
      std::string ignored;
      tools::merge({{}, std::move(deltas), {}}, ignored, calls);
    }
  }
};

/// How a choice ended, as its encoder writes it.
struct output_finish {
  std::string_view reason;         ///< "stop", "length", "tool_calls"...
  std::string_view stop_sequence;  ///< the stop string that ended it, "" for none
  /// The text was parsed for reasoning or tool calls (a plain completion's
  /// body is written without the message fields they add).
  bool parsed = false;
};

} // namespace troupe
