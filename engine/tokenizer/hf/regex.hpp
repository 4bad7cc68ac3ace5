#pragma once
// A tokenizer.json regular expression (Oniguruma syntax in the file: \p{L},
// (?i:...), lookahead), run by PCRE2 with JIT in UTF mode with Unicode
// properties. Compiled once; matching is const and thread-safe.

#include <cstddef>
#include <string>
#include <string_view>

struct pcre2_real_code_8;

namespace troupe::hf {

class regex {
public:
  /// Throws hf_error naming the pattern and PCRE2's complaint.
  explicit regex(std::string_view pattern);
  regex(regex&& other) noexcept;
  auto operator=(regex&&) = delete;
  regex(const regex&) = delete;
  ~regex();

  /// Calls f(begin, end) for each non-empty match of `text` (valid UTF-8),
  /// left to right, not overlapping. A match error (e.g. the JIT stack
  /// exhausted) ends the search: the rest of the text is unmatched.
  template <class F>
  auto for_each_match(std::string_view text, F&& f) const -> void {
    auto begin = std::size_t{0};
    auto end = std::size_t{0};
    auto at = std::size_t{0};
    while (at <= text.size() && next_match(text, at, begin, end)) {
      if (end > begin) {
        f(begin, end);
        at = end;
      } else { // an empty match: step over one character
        at = begin + 1;
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      }
    }
  }

  /// `text` with each match replaced by `with` (Replace with a Regex pattern).
  auto replace(std::string_view text, std::string_view with) const -> std::string {
    auto out = std::string{};
    auto last = std::size_t{0};
    for_each_match(text, [&](std::size_t b, std::size_t e) {
      out.append(text.substr(last, b - last)).append(with);
      last = e;
    });
    return out.append(text.substr(last));
  }

private:
  auto next_match(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end) const -> bool;
  pcre2_real_code_8* code_ = nullptr;
};

/// `text` with each occurrence of `from` (non-empty) replaced by `to`
/// (Replace with a String pattern, and Metaspace's replacement).
inline auto replace_all(std::string_view text, std::string_view from, std::string_view to) -> std::string {
  auto out = std::string{};
  out.reserve(text.size());
  for (auto pos = text.find(from); !from.empty() && pos != std::string_view::npos; pos = text.find(from)) {
    out.append(text.substr(0, pos)).append(to);
    text.remove_prefix(pos + from.size());
  }
  return out.append(text);
}

} // namespace troupe::hf
