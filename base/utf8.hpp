#pragma once
// troupe's one UTF-8 codec: what continues a character, how long one is,
// whether text is well-formed, its first character (or what one U+FFFD
// replaces), a code point's bytes, and the code point of a well-formed one.

#include <cstdint>
#include <string>
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

struct utf8_front {
  std::size_t length; ///< bytes
  bool valid;
};

/// The UTF-8 character at the front of s (RFC 3629: no overlongs, surrogates or
/// code points past U+10FFFF), or when it is not valid, the bytes one U+FFFD
/// replaces (Unicode's "maximal subpart", as Python's errors="replace" does).
inline auto front_char(std::string_view s) -> utf8_front {
  const auto byte = [&](std::size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  const unsigned b = byte(0);
  std::size_t num_more = 0;
  unsigned lo = 0x80, hi = 0xBF; // the range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    num_more = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    num_more = 2;
    if (b == 0xE0) lo = 0xA0; // overlong below
    if (b == 0xED) hi = 0x9F; // surrogates above
  } else if (b >= 0xF0 && b <= 0xF4) {
    num_more = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F; // past U+10FFFF above
  } else {
    return {1, b < 0x80};
  }
  for (std::size_t i = 1; i <= num_more; ++i) {
    const unsigned c = byte(i);
    if (i == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return {i, false};
  }
  return {num_more + 1, true};
}

/// Bytes in the character a lead byte opens (by its bit pattern alone, as
/// sentencepiece's DecodeUTF8 reads it); 0 when it opens none.
constexpr auto utf8_sequence_length(unsigned char lead) -> std::size_t {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

/// The code point of the well-formed character of `length` bytes at s[at]
/// (front_char said so).
constexpr auto code_point_at(std::string_view s, std::size_t at, std::size_t length) -> char32_t {
  const auto b = static_cast<unsigned char>(s[at]);
  char32_t cp = length == 1 ? b : length == 2 ? (b & 0x1Fu) : length == 3 ? (b & 0x0Fu) : (b & 0x07u);
  for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[at + k]) & 0x3Fu);
  return cp;
}

/// Appends code point cp (at most U+10FFFF) as UTF-8.
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

} // namespace troupe
