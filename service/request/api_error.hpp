#pragma once
// A request's error: its HTTP status and what the body says. Each wire
// protocol writes it in its own shape (wire_protocol::error_body).

#include <string>

namespace troupe::api {

/// An OpenAI-style error; status is the HTTP status (400, 404, 405, 413, 429, 503...).
struct api_error {
  int status = 400;
  std::string message;                        ///< one sentence naming the field and the problem
  std::string type = "invalid_request_error"; ///< OpenAI's error type
  std::string param;                          ///< the offending field, "" when none
  /// "invalid_value", "invalid_type", "missing_field", "invalid_json", "model_not_found"...
  std::string code;
};

} // namespace troupe::api
