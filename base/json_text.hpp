#pragma once
// Small helpers for writing JSON text by hand (safetensors headers, config.json,
// the OpenAI API's responses): no JSON library beyond simdjson for reading.

#include "base/utf8.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace troupe::json_text {


/// Appends s as a quoted JSON string, escaping quotes, backslashes and control
/// characters. Valid UTF-8 passes through; each invalid sequence (a token
/// piece may hold part of a character) becomes one U+FFFD, so the output is
/// always valid JSON.
inline void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // A token piece may be part of a character; JSON must stay UTF-8.
      const auto ch = front_char(s.substr(i));
      if (ch.valid) out.append(s.substr(i, ch.length));
      else out += "\xEF\xBF\xBD";
      i += ch.length;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

/// Appends an integer, or a float/double in its shortest round-trip form,
/// with whole numbers written as Python does ("500000.0", not "5e+05").
/// The caller keeps non-finite values out (JSON has no inf or nan).
template <class Number>
void append_number(std::string& out, Number v) {
  char buf[32];
  if constexpr (std::is_floating_point_v<Number>) {
    if (v == std::trunc(v) && std::abs(v) < Number(1e15)) {
      const auto res = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
      out.append(buf, res.ptr);
      out += ".0";
      return;
    }
  }
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

/// A number as a message shows a request's value: the shortest natural
/// spelling, %g's (1.5, 0.1, -2, 1e-06, inf), and "nan" for any NaN. (The
/// settings files' messages use settings::show_number, which reads back
/// exactly.)
/// s as a JSON string literal, with its quotes (append_string's rules).
inline auto quoted(std::string_view s) -> std::string {
  std::string out;
  out.reserve(s.size() + 2);
  append_string(out, s);
  return out;
}

inline auto show_number(double v) -> std::string {
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

} // namespace troupe::json_text
