// libFuzzer harness (make fuzz): the Jinja chat-template engine on any text.
// The input is a template, optionally followed by a NUL byte and a JSON
// object of variables (else a conversation with tools). Every input must
// render or end in one template_error / render_error, never crash or hang.

#include "engine/template/jinja_template.hpp"

#include <cstdint>
#include <ctime>
#include <string_view>

namespace {

const char* const k_variables = R"({
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? <think>x</think>"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": [{"type": "text", "text": "21.5 °C"}]}],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})";

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace troupe::jinja;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  const auto source = input.substr(0, nul);
  object variables;
  try {
    auto v = parse_json(nul == std::string_view::npos ? std::string_view(k_variables) : input.substr(nul + 1), "fuzz");
    if (v.is_object()) variables = v.obj();
  } catch (const render_error&) {
    variables = parse_json(k_variables, "fuzz").obj();
  }
  try {
    const jinja_template t(source);
    (void)t.render(variables, {[] { return std::tm{}; }});
  } catch (const template_error&) {
  } catch (const render_error&) {
  }
  return 0;
}
