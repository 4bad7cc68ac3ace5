#pragma once
// The Unicode steps of tokenizer.json (normal forms, lowercase, character
// classes Rust's char answers) through utf8proc, and GPT-2's byte-level
// alphabet. Inputs are valid UTF-8.

#include "base/utf8.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::hf {

enum class normal_form { nfc, nfd, nfkc, nfkd };

/// `text` in normal form `form` (utf8proc; ASCII is returned as it is).
auto normalize(std::string_view text, normal_form form) -> std::string;

/// Each character lowercased as Rust's char::to_lowercase does (utf8proc's
/// simple mapping, plus U+0130's two-character one).
auto lowercase(std::string_view text) -> std::string;

/// Rust's char::is_whitespace: the White_Space property.
auto is_whitespace(char32_t c) -> bool;

/// Rust's char::is_numeric: general category Nd, Nl or No.
auto is_numeric(char32_t c) -> bool;

/// The code point at text[at] and its length in bytes (text is valid UTF-8).
auto decode_utf8(std::string_view text, std::size_t at, char32_t& c) -> std::size_t;

using troupe::append_utf8; ///< (base/utf8.hpp)

/// `bytes` with each maximal invalid UTF-8 subsequence replaced by U+FFFD, as
/// Rust's String::from_utf8_lossy does.
auto utf8_lossy(std::string_view bytes) -> std::string;

/// GPT-2's bytes_to_unicode: the character standing for each byte in a
/// byte-level vocabulary ("Ġ" for ' '), and back.
struct byte_alphabet {
  std::array<char32_t, 256> char_of{};
  /// The byte a character stands for, or -1 (indexed by code point < 324).
  std::array<std::int16_t, 324> byte_of{};
  byte_alphabet();
  /// A vocabulary string's bytes; false when some character is outside the
  /// alphabet.
  auto to_bytes(std::string_view token, std::string& out) const -> bool;
};

auto gpt2_alphabet() -> const byte_alphabet&;

} // namespace troupe::hf
