#pragma once
// tokenizer.json's "decoder": ByteLevel, Metaspace, ByteFallback, Fuse,
// Strip, Replace and Sequence of them (or null: tokens joined by spaces).
// decode() is HF's decode_chain, exactly; surface() is one token's bytes in
// the middle of a text, for the incremental detokenizer.

#include "engine/tokenizer/hf/json.hpp"
#include "engine/tokenizer/hf/regex.hpp"
#include "engine/tokenizer/tokenizer.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::hf {

class decoder {
public:
  explicit decoder(std::optional<dom::element> json);

  /// A ByteLevel decoder alone (GPT-2's, and a GGUF gpt2 vocabulary's).
  static auto byte_level() -> decoder;

  /// The text of `tokens` (vocabulary strings, special ones already left out).
  auto decode(std::vector<std::string> tokens) const -> std::string;

  /// One token's bytes mid-text: byte-level tokens as raw bytes (maybe not
  /// UTF-8 alone), "<0xNN>" as its byte (then `is_byte`), "▁" replaced.
  /// Steps over the whole text (a Strip after Fuse, Metaspace's first token)
  /// are left to leading().
  auto surface(std::string_view token, bool& is_byte, unsigned char& byte) const -> std::string;

  /// What the whole-text steps do to a leading space.
  auto leading() const -> leading_space_rule { return leading_; }
  auto has_byte_fallback() const -> bool { return has_byte_fallback_; }

private:
  enum class kind { byte_level, replace_string, replace_regex, byte_fallback, fuse, strip, metaspace };
  struct step {
    kind what;
    std::string pattern, content; ///< replace; strip's and metaspace's character in `content`
    std::unique_ptr<regex> re;
    std::size_t start = 0, stop = 0; ///< strip
    bool prepend = true;             ///< metaspace: prepend_scheme is not "never"
  };
  auto add(dom::element json) -> void;

  std::vector<step> steps_;
  bool none_ = true;
  bool has_byte_fallback_ = false;
  leading_space_rule leading_ = leading_space_rule::keep;
};

/// "<0xNN>" -> NN, as HF's ByteFallback reads it; false for other tokens.
auto byte_fallback_value(std::string_view token, unsigned char& byte) -> bool;

} // namespace troupe::hf
