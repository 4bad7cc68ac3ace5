#pragma once
// Small helpers for writing JSON text by hand (safetensors headers, config.json),
// so the model layer needs no JSON library beyond simdjson for reading.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace troupe::json_text {

/// Appends s as a quoted JSON string, escaping quotes, backslashes and control
/// characters. Bytes >= 0x80 pass through unchanged (UTF-8 stays UTF-8).
inline void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
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

} // namespace troupe::json_text
