#pragma once
// The tools a request offers the model and how it must use them, as every
// API's parser reads them.

#include <string>

namespace troupe::api {

/// One function a request offers the model (tools[i].function).
struct tool_spec {
  std::string name;
  std::string parameters; ///< its JSON Schema's text; "" for none (any object)
};

/// tool_choice: "none", "auto", "required", or one named function.
struct tool_choice {
  enum class mode { none, automatic, required, named };
  mode what = mode::automatic;
  std::string name; ///< named: the function
};

} // namespace troupe::api
