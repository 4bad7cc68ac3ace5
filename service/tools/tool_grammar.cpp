#include "service/tools/tool_grammar.hpp"
#include "service/tools/harmony_parser.hpp"
#include "base/json_text.hpp"

#include "engine/grammar/grammar.hpp"
#include "engine/grammar/json_schema.hpp"

namespace troupe::tools {

auto detect_tool_parser(std::string_view t) -> std::string {
  if (t.find("<|channel|>") != std::string_view::npos) return "harmony";
  if (t.find("<tool_call>") != std::string_view::npos) return "hermes";
  if (t.find("[TOOL_CALLS]") != std::string_view::npos) return "mistral";
  if (t.find("<|python_tag|>") != std::string_view::npos || t.find("ipython") != std::string_view::npos)
    return "llama3_json";
  return "";
}

auto tool_markers(std::string_view family) -> std::vector<std::string> {
  if (family == "hermes") return {"<tool_call>", "</tool_call>"};
  if (family == "mistral") return {"[TOOL_CALLS]"};
  if (family == "llama3_json") return {"<|python_tag|>"};
  if (family == "harmony") return {std::begin(harmony_parser::markers), std::end(harmony_parser::markers)};
  return {};
}

auto tool_call_grammar(std::string_view family, const std::vector<api::tool_spec>& tools, const api::tool_choice& choice,
                       bool parallel) -> std::string {
  grammar::json_schema_grammar g;
  const std::string key = family == "llama3_json" ? "parameters" : "arguments";
  std::string calls;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const auto& t = tools[i];
    if (choice.what == api::tool_choice::mode::named && t.name != choice.name) continue;
    std::string args;
    try {
      args = t.parameters.empty() ? g.any_object() : g.add(t.parameters, "tool" + std::to_string(i));
    } catch (const grammar::grammar_error& e) {
      throw grammar::grammar_error("tools[" + std::to_string(i) + "].function.parameters: " + e.what());
    }
    if (family == "harmony") { // a message to functions.NAME, its body the arguments
      const auto head = "<|channel|>commentary to=functions." + t.name + " <|constrain|>json<|message|>";
      calls += (calls.empty() ? "" : " | ") + grammar::gbnf_literal(head) + " " + args;
      continue;
    }
    const auto head = "{\"name\": " + json_text::quoted(t.name) + ", \"" + key + "\": ";
    calls += (calls.empty() ? "" : " | ") + grammar::gbnf_literal(head) + " " + args + " \"}\"";
  }
  if (family == "harmony") { // one call: <|call|> ends the turn
    g.add_rule("root", calls);
    return harmony_parser::grammar(g.text());
  }
  g.add_rule("tool-call-object", calls);
  std::string root;
  if (family == "hermes") {
    g.add_rule("tool-call", "\"<tool_call>\\n\" tool-call-object \"\\n</tool_call>\"");
    root = parallel ? "tool-call (\"\\n\" tool-call)*" : "tool-call";
  } else if (family == "mistral") {
    root = parallel ? "\"[TOOL_CALLS][\" tool-call-object (\", \" tool-call-object)* \"]\""
                    : "\"[TOOL_CALLS][\" tool-call-object \"]\"";
  } else {
    root = parallel ? "tool-call-object (\"; \" tool-call-object)*" : "tool-call-object";
  }
  g.add_rule("root", root);
  return g.text();
}

} // namespace troupe::tools
