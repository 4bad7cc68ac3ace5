#pragma once
// Reading the tool-calling fields of a chat request: tools, tool_choice, and
// a message's tool_calls; and the flat tools of the Responses and Messages
// APIs. Internal to service/http.

#include "service/http/json_reader.hpp"
#include "service/tools/tool_spec.hpp"

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

/// One tool as read: its name as the model calls it, its entry in chat's
/// tools (the template's), and whether it is deferred (defer_loading: the
/// template lists it only once a tool_reference names it).
struct flat_tool {
  std::string name, chat_json;
  bool deferred = false;
};

/// What read_flat_tools gives: the tools, and the hosted tools' types
/// (web_search, web_search_20250305...), which troupe cannot run: they are
/// not offered to the model (docs/api.md).
struct flat_tools {
  std::vector<flat_tool> tools;
  std::vector<std::string> skipped;
  std::vector<std::string> namespaces; ///< Responses' namespace tools: their names
};

/// tools in that shape: each tool's name and schema into `specs`, and each
/// one's chat entry into `out`. A Responses `namespace` tool ({"name",
/// "description", "tools": [functions]}) gives its functions as
/// "namespace.function". A tool of another type is a hosted one (skipped),
/// but Responses' "custom" tools (run by the client: refused). A missing
/// name or required schema, a repeated name, a schema that is not an
/// object: 400s naming the field. Other fields are skipped. `raw` (may be
/// null) gets the array's own text.
auto read_flat_tools(json_reader::od::value& v, const flat_tool_shape& shape, std::vector<tool_spec>& specs,
                     flat_tools& out, std::string* raw = nullptr) -> json_reader::problem;

/// Chat's tools array (for the template) of the tools not deferred and of
/// the deferred ones that `referenced` names.
auto chat_tools_json(const std::vector<flat_tool>& tools, const std::vector<std::string>& referenced) -> std::string;

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
