// GBNF text helpers: UTF-8 encoding, renaming a rule, and writing a
// literal, for the writers that build or wrap a grammar's text.

#include "engine/grammar/grammar.hpp"

#include "base/utf8.hpp"

#include <algorithm>
#include <cstdio>

namespace troupe::grammar {

auto utf8_encode(std::uint32_t cp) -> std::string {
  std::string s;
  append_utf8(s, static_cast<char32_t>(cp));
  return s;
}

auto rename_rule(std::string_view gbnf, std::string_view from, std::string_view to) -> std::string {
  std::string out;
  const auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  };
  for (std::size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"' || c == '[') { // a literal or a class, escapes and all
      const char close = c == '"' ? '"' : ']';
      std::size_t j = i + 1;
      while (j < gbnf.size() && gbnf[j] != close) j += gbnf[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, gbnf.size());
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else if (c == '#') {
      const auto j = std::min(gbnf.find('\n', i), gbnf.size());
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else if (name_char(c)) {
      std::size_t j = i;
      while (j < gbnf.size() && name_char(gbnf[j])) ++j;
      const auto name = gbnf.substr(i, j - i);
      out.append(name == from ? to : name);
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

auto gbnf_literal(std::string_view s) -> std::string {
  std::string out = "\"";
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", b);
      out += buf;
    } else {
      out += c; // ASCII or part of a UTF-8 character
    }
  }
  out += '"';
  return out;
}

} // namespace troupe::grammar
