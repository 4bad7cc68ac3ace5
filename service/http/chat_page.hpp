#pragma once
// The web chat page served at GET /: one self-contained HTML document (no
// external resources) that streams answers over the WebSocket at
// /v1/chat/stream.

#include <string_view>

namespace troupe {

auto chat_page() -> std::string_view;

} // namespace troupe
