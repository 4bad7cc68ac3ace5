#pragma once

#include <cstdint>
#include <string_view>

namespace troupe {

/// Whether byte b continues a UTF-8 character (10xxxxxx).
constexpr auto is_utf8_continuation(unsigned char b) -> bool { return (b & 0xC0) == 0x80; }

/// Unicode characters in UTF-8 text: the bytes that do not continue one.
constexpr auto num_code_points(std::string_view s) -> std::int64_t {
  std::int64_t n = 0;
  for (const char c : s) n += !is_utf8_continuation(static_cast<unsigned char>(c));
  return n;
}

} // namespace troupe
