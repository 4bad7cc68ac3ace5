#include "engine/tokenizer/hf/regex.hpp"

#include "engine/tokenizer/hf/json.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <utility>

namespace troupe::hf {
namespace {

/// Per thread: one match block (only the whole match is read) and a JIT
/// stack larger than PCRE2's 32 KiB default, for long runs of whitespace.
struct match_scratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 << 10, 4 << 20, nullptr);
  pcre2_match_context* context = [this] {
    auto* c = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(c, nullptr, stack);
    return c;
  }();
  ~match_scratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

auto scratch() -> match_scratch& {
  thread_local match_scratch s;
  return s;
}

// Oniguruma's \w (and so \b) in Unicode mode is Alphabetic, Mark, Nd and
// Pc, plus the Latin-1 digits and fractions its single-byte table counts
// (checked against HF's tokenizers); PCRE2 10.42's \w (UCP) is L, N and _,
// which splits Devanagari and Thai words at their marks. So \w, \W, \b
// and \B are spelled out in properties.
constexpr auto word_class = std::string_view{R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})"};

auto translate_oniguruma(std::string_view pattern) -> std::string {
  const auto word = "[" + std::string(word_class) + "]";
  const auto not_word = "[^" + std::string(word_class) + "]";
  auto out = std::string{};
  auto depth = 0; // inside how many (nested) character classes
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 'w') {
        out += depth > 0 ? std::string(word_class) : word;
      } else if (e == 'W' && depth == 0) {
        out += not_word;
      } else if (e == 'W') {
        throw hf_error("regex \"" + std::string(pattern) + "\": \\W inside a character class is not supported");
      } else if ((e == 'b' || e == 'B') && depth == 0) {
        const auto before = "(?<=" + word + ")", not_before = "(?<!" + word + ")";
        const auto after = "(?=" + word + ")", not_after = "(?!" + word + ")";
        out += e == 'b' ? "(?:" + before + not_after + "|" + not_before + after + ")"
                        : "(?:" + before + after + "|" + not_before + not_after + ")";
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      continue;
    }
    if (c == '[') ++depth;
    else if (c == ']' && depth > 0) --depth;
    out.push_back(c);
  }
  return out;
}

} // namespace

regex::regex(std::string_view pattern) {
  auto error = 0;
  auto offset = PCRE2_SIZE{0};
  const auto translated = translate_oniguruma(pattern);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), PCRE2_UTF | PCRE2_UCP,
                        &error, &offset, nullptr);
  if (code_ == nullptr) {
    auto message = std::string(256, '\0');
    const auto n = pcre2_get_error_message(error, reinterpret_cast<PCRE2_UCHAR*>(message.data()), message.size());
    message.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    throw hf_error("regex \"" + std::string(pattern) + "\": " + message + " at offset " + std::to_string(offset));
  }
  if (pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) != 0) {
    pcre2_code_free(code_);
    throw hf_error("regex \"" + std::string(pattern) + "\": PCRE2 cannot JIT-compile it");
  }
}

regex::regex(regex&& other) noexcept : code_(std::exchange(other.code_, nullptr)) {}

regex::~regex() { pcre2_code_free(code_); }

auto regex::next_match(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end) const -> bool {
  auto& s = scratch();
  // The text was checked as UTF-8 once, before the pipeline.
  const auto rc = pcre2_jit_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from,
                                  PCRE2_NO_UTF_CHECK, s.data, s.context);
  if (rc < 0) return false;
  const auto* ov = pcre2_get_ovector_pointer(s.data);
  begin = ov[0];
  end = ov[1];
  return true;
}

} // namespace troupe::hf
