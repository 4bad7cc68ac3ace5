#pragma once
// Reading the tool-calling fields of a chat request: tools, tool_choice, and
// a message's tool_calls; and the flat tools of the Responses and Messages
// APIs. Internal to service/http.

#include "service/http/json_reader.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace troupe::api::tool_fields {

/// tools: an array of {"type": "function", "function": {"name", "description",
/// "parameters", "strict"}}, kept as its JSON text for the chat template
/// (`raw`); each function's name and parameters' text into `specs` (may be
/// null). A type other than "function" (400, naming it), a missing or empty
/// name, a repeated name, parameters that are not an object: 400s.
auto read_tools(json_reader::od::value& v, std::string_view key, std::string& raw, std::vector<tool_spec>* specs)
    -> json_reader::problem;

/// How the Responses and Messages APIs spell a tool: flat, {"type", "name",
/// "description", <schema>}, with the schema under a key of their own.
struct flat_tool_shape {
  std::string_view type;   ///< the one tool type served: "function", "custom"
  bool type_optional;      ///< an absent "type" means that one
  std::string_view schema; ///< "parameters", "input_schema"
  bool schema_required;    ///< else an absent schema is an empty object's
  std::string_view others; ///< what the other types are, for their 400
};

/// The Messages API's: [{"name", "description", "input_schema"}], type "custom" if given.
inline constexpr flat_tool_shape messages_tools{
    .type = "custom", .type_optional = true, .schema = "input_schema", .schema_required = true, .others = "a server tool"};
/// The Responses API's: [{"type": "function", "name", "description", "parameters", "strict"}].
inline constexpr flat_tool_shape responses_tools{
    .type = "function", .type_optional = false, .schema = "parameters", .schema_required = false, .others = "a built-in tool"};

/// tools in that shape: each tool's name and schema into `specs`, and all of
/// them written as chat's function tools (`chat_json`) for the chat template.
/// Another type, a missing name or required schema, a repeated name, a schema
/// that is not an object: 400s naming the field. Other fields are skipped.
/// `raw` (may be null) gets the array's own text.
auto read_flat_tools(json_reader::od::value& v, const flat_tool_shape& shape, std::vector<tool_spec>& specs,
                     std::string& chat_json, std::string* raw = nullptr) -> json_reader::problem;

/// tool_choice: "none", "auto", "required", or {"type": "function",
/// "function": {"name"}}.
auto read_tool_choice(json_reader::od::value& v, tool_choice& out) -> json_reader::problem;

/// An assistant message's tool_calls: [{"id", "type": "function", "function":
/// {"name", "arguments"}}], written back as JSON with each arguments string
/// that holds a JSON object given as that object (chat_message::tool_calls_json).
auto read_tool_calls(json_reader::od::value& v, const std::string& path, std::string& out)
    -> json_reader::problem;

/// One call as chat_message::tool_calls_json lists it: {"id", "type":
/// "function", "function": {"name", "arguments"}}, the arguments given as
/// their object when they hold one (else as a string).
auto tool_call_json(std::string_view id, std::string_view name, std::string_view arguments) -> std::string;

} // namespace troupe::api::tool_fields
