#pragma once
// tokenizer.json's "normalizer": NFC, NFD, NFKC, NFKD, Lowercase, Replace,
// Prepend and Sequence of them (or null). Anything else stops loading.

#include "engine/tokenizer/hf/json.hpp"
#include "engine/tokenizer/hf/regex.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::hf {

class normalizer {
public:
  /// From the JSON value (null: no steps); throws hf_error.
  explicit normalizer(std::optional<dom::element> json);

  /// Applies every step in order.
  auto apply(std::string_view text) const -> std::string;
  auto empty() const -> bool { return steps_.empty(); }

private:
  enum class kind { nfc, nfd, nfkc, nfkd, lowercase, replace_string, replace_regex, prepend };
  struct step {
    kind what;
    std::string pattern;            ///< replace_string's text
    std::string content;            ///< replace's replacement, prepend's prefix
    std::unique_ptr<regex> pattern_regex;
  };
  auto add(dom::element json) -> void;
  std::vector<step> steps_;
};

} // namespace troupe::hf
