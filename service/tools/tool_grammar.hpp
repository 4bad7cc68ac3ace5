#pragma once
// Which tool-call format a model writes, and the grammar that makes it
// write a call: tool_choice "required" or a named function, enforced by
// structured output (engine/grammar) in the family's own format.

#include "service/tools/tool_spec.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace troupe::tools {

/// The tool-call format a chat template writes (the parser's name), read
/// from its text: "<tool_call>" is hermes, "[TOOL_CALLS]" mistral,
/// "<|python_tag|>" or an ipython role llama3_json; "" when it shows none.
auto detect_tool_parser(std::string_view template_text) -> std::string;

/// The special tokens a family's calls are marked with ("<tool_call>",
/// "[TOOL_CALLS]"...): shown in the answer's text for the parser to see.
auto tool_markers(std::string_view family) -> std::vector<std::string>;

/// GBNF for one call (or, with `parallel`, one or more) in `family`'s
/// format, of the functions tool_choice allows (all for required, the named
/// one), each with arguments valid under its parameters schema (harmony:
/// one call, after an optional analysis message; <|call|> ends the turn). Throws
/// grammar::grammar_error naming the tool whose schema cannot be honoured.
auto tool_call_grammar(std::string_view family, const std::vector<api::tool_spec>& tools, const api::tool_choice& choice,
                       bool parallel) -> std::string;

} // namespace troupe::tools
