#pragma once
// A Jinja2 template as Hugging Face's apply_chat_template renders it:
// jinja2 3.1 in an ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and loopcontrols, its tojson replaced by json.dumps
// (ensure_ascii off), raise_exception and strftime_now as globals, and the
// {% generation %} tag of its AssistantTracker. python3-jinja2 so
// configured is the reference (tests/integration/chat_template_test.py).
//
// Parsing refuses, with "line L col C: <what>", everything troupe does not
// render (an unknown filter, test or statement); rendering throws
// render_error, one line, where jinja2 raises.

#include "engine/template/jinja_lexer.hpp"
#include "engine/template/value.hpp"

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace troupe::jinja {

struct program;

struct render_options {
  /// The local time strftime_now formats (Python's datetime.now()); the
  /// server passes the wall clock, tests a fixed time. Null: strftime_now
  /// fails.
  std::function<std::tm()> now;
};

class jinja_template {
public:
  /// Parses `source`; throws template_error.
  explicit jinja_template(std::string_view source);

  /// The text for `variables` (messages, tools, bos_token, ...: any name the
  /// template reads; a missing one is Undefined). Throws render_error.
  [[nodiscard]] auto render(const object& variables, const render_options& options) const -> std::string;

private:
  std::shared_ptr<const program> program_; // shared: copies of a template share one parse
};

} // namespace troupe::jinja
