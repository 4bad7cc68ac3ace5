#include "engine/grammar/token_vocabulary.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace troupe::grammar {

token_vocabulary::token_vocabulary(std::vector<std::string> surfaces, std::vector<token_id> end_ids)
  : surfaces_(std::move(surfaces)), end_ids_(std::move(end_ids)) {
  std::vector<token_id> order;
  for (std::size_t i = 0; i < surfaces_.size(); ++i)
    if (!surfaces_[i].empty()) order.push_back(static_cast<token_id>(i));
  std::sort(order.begin(), order.end(), [&](token_id a, token_id b) {
    const auto& sa = surfaces_[static_cast<std::size_t>(a)];
    const auto& sb = surfaces_[static_cast<std::size_t>(b)];
    return sa != sb ? sa < sb : a < b;
  });
  // Sorted surfaces give the trie in preorder: each token's path shares the
  // previous token's path up to their common prefix; the rest is new nodes.
  std::vector<std::int32_t> path; // node index at each depth - 1
  std::string_view prev;
  for (const auto id : order) {
    const std::string_view s = surfaces_[static_cast<std::size_t>(id)];
    std::size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    for (std::size_t d = path.size(); d > common; --d) {
      nodes_[static_cast<std::size_t>(path[d - 1])].end = static_cast<std::int32_t>(nodes_.size());
      path.pop_back();
    }
    for (std::size_t d = common; d < s.size(); ++d) {
      node n;
      n.depth = static_cast<std::uint16_t>(std::min<std::size_t>(d + 1, std::numeric_limits<std::uint16_t>::max()));
      n.byte = static_cast<std::uint8_t>(s[d]);
      n.first_token = static_cast<std::int32_t>(token_ids_.size());
      path.push_back(static_cast<std::int32_t>(nodes_.size()));
      nodes_.push_back(n);
    }
    auto& last = nodes_[static_cast<std::size_t>(path.back())];
    if (last.num_tokens == 0) last.first_token = static_cast<std::int32_t>(token_ids_.size());
    token_ids_.push_back(id);
    ++last.num_tokens;
    max_depth_ = std::max(max_depth_, static_cast<std::int32_t>(s.size()));
    prev = s;
  }
  for (const auto i : path) nodes_[static_cast<std::size_t>(i)].end = static_cast<std::int32_t>(nodes_.size());
}

auto token_vocabulary::longest_prefix(std::string_view bytes) const -> std::pair<token_id, std::size_t> {
  // Down the trie along `bytes`: a node's children follow it, each sibling
  // starts where the one before it ends (node::end).
  std::pair<token_id, std::size_t> best{-1, 0};
  std::size_t i = 0, end = nodes_.size(), depth = 0;
  while (i < end && depth < bytes.size()) {
    const auto& n = nodes_[i];
    if (n.byte != static_cast<std::uint8_t>(bytes[depth])) {
      i = static_cast<std::size_t>(n.end);
      continue;
    }
    ++depth;
    if (n.num_tokens > 0) best = {token_ids_[static_cast<std::size_t>(n.first_token)], depth};
    end = static_cast<std::size_t>(n.end);
    ++i;
  }
  return best;
}

} // namespace troupe::grammar
