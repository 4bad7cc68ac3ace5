#pragma once
// Why a request ended, shared by the scheduler core, the output processor
// and the server (kept light: no tokenizer behind it).

#include <cstdint>
#include <string_view>

namespace troupe {

/// error: the replica failed (its executor, or failed health checks): the
/// server retries the request elsewhere or ends it with an error.
enum class finish_reason : std::uint8_t { none, stop, length, abort, error };

/// "stop", "length", "abort", "error" (OpenAI's finish_reason spelling); "" for none.
constexpr auto finish_reason_name(finish_reason r) -> std::string_view {
  switch (r) {
    case finish_reason::stop: return "stop";
    case finish_reason::length: return "length";
    case finish_reason::abort: return "abort";
    case finish_reason::error: return "error";
    case finish_reason::none: break;
  }
  return "";
}

} // namespace troupe
