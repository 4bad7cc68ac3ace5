#pragma once
// tokenizer.json's "added_tokens", matched before the model as HF's
// AddedVocabulary does: tokens with normalized = false on the raw text,
// then those with normalized = true (their content normalized) on each
// normalized stretch between; leftmost-longest, not overlapping; lstrip /
// rstrip take the whitespace beside a match into it, single_word needs no
// word character on either side.

#include "base/types.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe::hf {

struct added_token {
  std::string content;
  token_id id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

/// A stretch of text: an added token's id, or -1 for text to encode.
struct text_span {
  std::size_t begin, end;
  token_id id;
};

class added_vocabulary {
public:
  /// `normalize` turns a normalized token's content into the text it is
  /// matched against.
  template <class Normalize>
  added_vocabulary(std::vector<added_token> tokens, Normalize&& normalize) : tokens_(std::move(tokens)) {
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      auto& t = tokens_[i];
      if (t.content.empty()) continue;
      auto& trie = t.normalized ? normalized_ : raw_;
      insert(trie, t.normalized ? normalize(t.content) : t.content, static_cast<std::int32_t>(i));
    }
  }

  /// Cuts `text` into spans (in order, covering it; empty text: none) at the
  /// `normalized` pass's tokens; with `skip_special`, special tokens are
  /// left as text (HF's split_special_tokens).
  auto split(std::string_view text, bool normalized, bool skip_special, std::vector<text_span>& out) const -> void;

  auto tokens() const -> const std::vector<added_token>& { return tokens_; }

private:
  struct trie {
    std::unordered_map<std::uint64_t, std::int32_t> edges; ///< node << 8 | byte -> node
    std::vector<std::int32_t> token_at{-1};                ///< per node: index into tokens_, or -1
    std::vector<bool> first_byte = std::vector<bool>(256, false);
    auto empty() const -> bool { return token_at.size() == 1; }
  };
  static auto insert(trie& t, std::string_view key, std::int32_t token) -> void;
  /// The longest token starting at `at`, as (index, length); index -1: none.
  static auto longest_at(const trie& t, std::string_view text, std::size_t at) -> std::pair<std::int32_t, std::size_t>;

  std::vector<added_token> tokens_;
  trie raw_, normalized_;
};

} // namespace troupe::hf
