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

/// Whether s is well-formed UTF-8 (no overlong forms, surrogates or values
/// past U+10FFFF).
constexpr auto is_valid_utf8(std::string_view s) -> bool {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b < 0x80) { ++i; continue; }
    if ((b & 0xE0) == 0xC0) { n = 2; cp = b & 0x1Fu; }
    else if ((b & 0xF0) == 0xE0) { n = 3; cp = b & 0x0Fu; }
    else if ((b & 0xF8) == 0xF0) { n = 4; cp = b & 0x07u; }
    else return false;
    if (s.size() - i < n) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (!is_utf8_continuation(c)) return false;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    constexpr std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_length[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

} // namespace troupe
