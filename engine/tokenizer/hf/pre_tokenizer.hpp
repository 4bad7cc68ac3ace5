#pragma once
// tokenizer.json's "pre_tokenizer": Split (String or Regex, every behavior,
// invert), ByteLevel, Digits, Metaspace and Sequence of them (or null): cuts
// a normalized segment into the words the model encodes one by one.
// Anything else stops loading with one line naming it.

#include "engine/tokenizer/hf/json.hpp"
#include "engine/tokenizer/hf/regex.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::hf {

/// A word in the making. `at_start`: it begins at the input's offset 0
/// (Metaspace's prepend_scheme "first" asks).
struct pre_token {
  std::string text;
  bool at_start = false;
};

enum class split_behavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };

class pre_tokenizer {
public:
  /// From the JSON value (null: the segment is one word); throws hf_error.
  explicit pre_tokenizer(std::optional<dom::element> json);

  /// Split by each of `regexes` in turn (Isolated: a regex cuts the pieces
  /// the one before left), then ByteLevel without a regex of its own: how
  /// llama.cpp pre-tokenizes a byte-level BPE, and tokenizer.json files
  /// spell it. Throws hf_error for a regex PCRE2 refuses.
  explicit pre_tokenizer(std::span<const std::string_view> regexes);

  /// Whether the chain ends in ByteLevel: the words are then raw bytes
  /// (byte_level mapping is left to the model, which holds its vocabulary
  /// as bytes).
  auto byte_level() const -> bool { return byte_level_; }

  /// Cuts `segment` into words, appended to `out` (empty ones dropped).
  /// `scratch` is reused between calls.
  auto split(std::string_view segment, bool at_start, std::vector<pre_token>& out,
             std::vector<pre_token>& scratch) const -> void;

private:
  enum class kind { split_string, split_regex, byte_level, digits, metaspace };
  struct step {
    kind what;
    split_behavior behavior = split_behavior::isolated;
    bool invert = false;
    std::string pattern;             ///< split_string's text, metaspace's replacement
    std::unique_ptr<regex> re;       ///< split_regex, byte_level with use_regex
    bool add_prefix_space = false;   ///< byte_level
    bool individual_digits = false;  ///< digits
    int prepend_scheme = 0;          ///< metaspace: 0 always, 1 first, 2 never
    bool split = true;               ///< metaspace
  };
  auto add(dom::element json) -> void;
  auto apply(const step& st, pre_token&& in, std::vector<pre_token>& out) const -> void;

  std::vector<step> steps_;
  bool byte_level_ = false;
};

} // namespace troupe::hf
