#include "engine/tokenizer/hf/unicode.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace troupe::hf {
namespace {

auto is_ascii(std::string_view text) -> bool {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

} // namespace

auto normalize(std::string_view text, normal_form form) -> std::string {
  if (is_ascii(text)) return std::string(text);
  auto options = UTF8PROC_STABLE;
  switch (form) {
  case normal_form::nfc: options = utf8proc_option_t(options | UTF8PROC_COMPOSE); break;
  case normal_form::nfd: options = utf8proc_option_t(options | UTF8PROC_DECOMPOSE); break;
  case normal_form::nfkc: options = utf8proc_option_t(options | UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
  case normal_form::nfkd: options = utf8proc_option_t(options | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &out, options);
  if (n < 0) return std::string(text); // not UTF-8: the caller checked, so this does not happen
  const auto owned = std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)>(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

auto decode_utf8(std::string_view text, std::size_t at, char32_t& c) -> std::size_t {
  auto cp = utf8proc_int32_t{0};
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + at),
                                  static_cast<utf8proc_ssize_t>(text.size() - at), &cp);
  if (n <= 0) {
    c = 0xFFFD;
    return 1;
  }
  c = static_cast<char32_t>(cp);
  return static_cast<std::size_t>(n);
}

auto lowercase(std::string_view text) -> std::string {
  auto out = std::string{};
  out.reserve(text.size());
  for (auto at = std::size_t{0}; at < text.size();) {
    const auto b = static_cast<unsigned char>(text[at]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++at;
      continue;
    }
    auto c = char32_t{0};
    at += decode_utf8(text, at, c);
    // Rust's char::to_lowercase is the full mapping: U+0130 is the one
    // character whose lowercase (SpecialCasing.txt, unconditional) is two.
    if (c == 0x130) {
      out.append("i\xCC\x87");
      continue;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}

auto is_whitespace(char32_t c) -> bool {
  // The White_Space property (PropList.txt): these 25 code points.
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  switch (c) {
  case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
    return true;
  default:
    return c >= 0x2000 && c <= 0x200A;
  }
}

auto is_numeric(char32_t c) -> bool {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

auto utf8_lossy(std::string_view bytes) -> std::string {
  auto out = std::string{};
  out.reserve(bytes.size());
  for (auto i = std::size_t{0}; i < bytes.size();) {
    // Each maximal subpart of an ill-formed sequence (Unicode's table 3-7) is one U+FFFD.
    const auto ch = front_char(bytes.substr(i));
    if (ch.valid)
      out.append(bytes.substr(i, ch.length));
    else
      out.append("\xEF\xBF\xBD");
    i += ch.length;
  }
  return out;
}

byte_alphabet::byte_alphabet() {
  byte_of.fill(-1);
  auto next = char32_t{256};
  for (auto b = 0; b < 256; ++b) {
    const auto printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char_of[b] = printable ? static_cast<char32_t>(b) : next++;
    byte_of[char_of[b]] = static_cast<std::int16_t>(b);
  }
}

auto byte_alphabet::to_bytes(std::string_view token, std::string& out) const -> bool {
  out.clear();
  for (auto at = std::size_t{0}; at < token.size();) {
    auto c = char32_t{0};
    at += decode_utf8(token, at, c);
    if (c >= byte_of.size() || byte_of[c] < 0) return false;
    out.push_back(static_cast<char>(byte_of[c]));
  }
  return true;
}

auto gpt2_alphabet() -> const byte_alphabet& {
  static const auto alphabet = byte_alphabet{};
  return alphabet;
}

} // namespace troupe::hf
