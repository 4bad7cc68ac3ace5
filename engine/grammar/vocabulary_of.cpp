// token_vocabulary::of, apart: the grammar core needs no tokenizer (its
// fuzz harness links none).
#include "engine/grammar/token_vocabulary.hpp"

#include "engine/tokenizer/tokenizer.hpp"

#include <algorithm>

namespace troupe::grammar {

auto token_vocabulary::of(const tokenizer& tok, std::vector<token_id> end_ids, std::int64_t num_ids,
                          const std::vector<token_id>& markers) -> token_vocabulary {
  const auto n = num_ids < 0 ? tok.vocab_size() : std::min<std::int64_t>(num_ids, tok.vocab_size());
  std::vector<std::string> surfaces(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<token_id>(i);
    if (std::find(markers.begin(), markers.end(), id) != markers.end()) {
      surfaces[static_cast<std::size_t>(i)] = std::string(tok.piece(id));
      continue;
    }
    if (tok.is_control(id) || tok.is_unknown(id)) continue;
    surfaces[static_cast<std::size_t>(i)] = std::string(tok.token_surface(id));
  }
  return token_vocabulary(std::move(surfaces), std::move(end_ids));
}

} // namespace troupe::grammar
