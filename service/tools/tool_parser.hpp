#pragma once
// Tool calls in a model's output, parsed as it streams: each model family
// writes them its own way, and OpenAI's API streams them as deltas (a call's
// index, id and name first, then fragments of its arguments). A parser is
// fed the generated text piece by piece and says, at each piece, what is
// plain content and what is a tool call; text that may still turn out to
// open a call is held back until it is decided.
//
//   hermes       Hermes / Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated
//   llama3_json  Llama 3.x: {"name": ..., "parameters": {...}} opening the answer (after an
//                optional <|python_tag|>), several separated by ';'
//   mistral      Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//   harmony      gpt-oss: messages to=functions.NAME, with its reasoning too (harmony_parser.hpp)
//
// A call object's "arguments" (or "parameters") value streams as its JSON
// text; given as a JSON string, it is that string's text. Plain C++.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::tools {

/// One call's news: its first delta carries the id and the name; later ones
/// more of the arguments' text.
struct call_delta {
  std::size_t index = 0;
  std::string id;        ///< set once, with the name
  std::string name;
  std::string arguments; ///< a fragment
  friend auto operator==(const call_delta&, const call_delta&) -> bool = default;
};

struct parse_delta {
  std::string content;           ///< plain text
  std::vector<call_delta> calls; ///< in order
  std::string reasoning;         ///< harmony's analysis channel (before the content)
};

/// A whole call, as a non-streamed response gives it.
struct tool_call {
  std::string id, name, arguments;
  friend auto operator==(const tool_call&, const tool_call&) -> bool = default;
};

class tool_parser {
public:
  virtual ~tool_parser() = default;
  /// More generated text.
  virtual auto feed(std::string_view text) -> parse_delta = 0;
  /// The end of the output: what was held back. A call left unfinished is
  /// given as far as it went.
  virtual auto finish() -> parse_delta = 0;
};

/// Makes call ids ("call_" and 24 characters, as OpenAI's look).
using id_source = std::function<std::string()>;

auto tool_parser_names() -> std::vector<std::string>;
/// A parser of the family `name` (tool_parser_names()); nullptr for an unknown one.
auto make_tool_parser(std::string_view name, id_source ids) -> std::unique_ptr<tool_parser>;

/// The deltas merged: the content, then every call whole.
void merge(const parse_delta& d, std::string& content, std::vector<tool_call>& calls);

} // namespace troupe::tools
