#pragma once
// A tokenizer's ids as the grammar sees them: the bytes each adds to the
// text, in a trie so that a token mask walks shared prefixes once.

#include "base/types.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {
class tokenizer;
}

namespace troupe::grammar {

class token_vocabulary {
public:
  /// One trie node, in preorder: the node after it is its first child.
  struct node {
    std::int32_t end = 0;          ///< index past its subtree
    std::int32_t first_token = 0;  ///< its tokens: token_ids()[first_token, + num_tokens)
    std::int32_t num_tokens = 0;
    std::uint16_t depth = 0;       ///< bytes from the root, >= 1
    std::uint8_t byte = 0;         ///< the byte that leads to it
  };

  /// surfaces[id]: the bytes token `id` adds to a text mid-stream; "" for a
  /// token the grammar never picks (control and unknown tokens). end_ids:
  /// the tokens that end the output (EOS), allowed where the grammar may end.
  token_vocabulary(std::vector<std::string> surfaces, std::vector<token_id> end_ids);

  /// A tokenizer's vocabulary: token_surface of every id but control and
  /// unknown ones (the ids past `num_ids` left out when it is smaller).
  /// `markers`: control tokens a grammar may write all the same, as their
  /// text (gpt-oss's harmony markers, which its tool calls are made of).
  static auto of(const tokenizer& tok, std::vector<token_id> end_ids, std::int64_t num_ids = -1,
                 const std::vector<token_id>& markers = {}) -> token_vocabulary;

  auto size() const -> std::int32_t { return static_cast<std::int32_t>(surfaces_.size()); }
  auto surface(token_id id) const -> std::string_view { return surfaces_[static_cast<std::size_t>(id)]; }
  auto end_ids() const -> const std::vector<token_id>& { return end_ids_; }
  auto nodes() const -> const std::vector<node>& { return nodes_; }
  auto token_ids() const -> const std::vector<token_id>& { return token_ids_; }
  auto max_depth() const -> std::int32_t { return max_depth_; }
  /// The longest token whose surface starts `bytes` (the lowest id among
  /// equal surfaces) and its length; {-1, 0} when no token does.
  auto longest_prefix(std::string_view bytes) const -> std::pair<token_id, std::size_t>;

private:
  std::vector<std::string> surfaces_;
  std::vector<token_id> end_ids_;
  std::vector<node> nodes_;
  std::vector<token_id> token_ids_;
  std::int32_t max_depth_ = 0;
};

} // namespace troupe::grammar
