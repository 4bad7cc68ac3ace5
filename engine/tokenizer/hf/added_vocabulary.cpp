#include "engine/tokenizer/hf/added_vocabulary.hpp"

#include "engine/tokenizer/hf/regex.hpp"
#include "engine/tokenizer/hf/unicode.hpp"

namespace troupe::hf {
namespace {

/// The character ending text[0, end): its start.
auto char_before(std::string_view text, std::size_t end) -> std::size_t {
  auto at = end - 1;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

/// Whether the character is a word character (regex \w, Unicode).
auto is_word(std::string_view character) -> bool {
  static const auto word = regex(R"(^\w)");
  auto found = false;
  word.for_each_match(character, [&](std::size_t, std::size_t) { found = true; });
  return found;
}

} // namespace

auto added_vocabulary::insert(trie& t, std::string_view key, std::int32_t token) -> void {
  auto node = std::int32_t{0};
  for (const char c : key) {
    const auto edge = static_cast<std::uint64_t>(node) << 8 | static_cast<unsigned char>(c);
    const auto it = t.edges.find(edge);
    if (it != t.edges.end()) {
      node = it->second;
    } else {
      const auto next = static_cast<std::int32_t>(t.token_at.size());
      t.token_at.push_back(-1);
      t.edges.emplace(edge, next);
      node = next;
    }
  }
  t.first_byte[static_cast<unsigned char>(key[0])] = true;
  if (t.token_at[node] < 0) t.token_at[node] = token; // the first of equal spellings
}

auto added_vocabulary::longest_at(const trie& t, std::string_view text, std::size_t at)
    -> std::pair<std::int32_t, std::size_t> {
  auto best = std::pair<std::int32_t, std::size_t>{-1, 0};
  auto node = std::int32_t{0};
  for (auto i = at; i < text.size(); ++i) {
    const auto edge = static_cast<std::uint64_t>(node) << 8 | static_cast<unsigned char>(text[i]);
    const auto it = t.edges.find(edge);
    if (it == t.edges.end()) break;
    node = it->second;
    if (t.token_at[node] >= 0) best = {t.token_at[node], i + 1 - at};
  }
  return best;
}

auto added_vocabulary::split(std::string_view text, bool normalized, bool skip_special,
                             std::vector<text_span>& out) const -> void {
  const auto& t = normalized ? normalized_ : raw_;
  if (text.empty()) return;
  auto start_offset = std::size_t{0};
  if (!t.empty()) {
    for (auto at = std::size_t{0}; at < text.size();) {
      if (!t.first_byte[static_cast<unsigned char>(text[at])]) {
        ++at;
        continue;
      }
      const auto [index, length] = longest_at(t, text, at);
      if (index < 0) {
        ++at;
        continue;
      }
      const auto& token = tokens_[index];
      auto start = at, stop = at + length;
      at = stop; // a match left unused is still consumed, as in HF's iterator
      if (skip_special && token.special) continue;
      if (token.single_word) {
        const auto word_before = start > 0 && is_word(text.substr(char_before(text, start)));
        const auto word_after = stop < text.size() && is_word(text.substr(stop));
        if (word_before || word_after) continue;
      }
      if (token.lstrip) {
        auto new_start = start;
        while (new_start > 0) {
          const auto prev = char_before(text, new_start);
          auto c = char32_t{0};
          decode_utf8(text, prev, c);
          if (!is_whitespace(c)) break;
          new_start = prev;
        }
        start = std::max(new_start, start_offset);
      }
      if (token.rstrip) {
        while (stop < text.size()) {
          auto c = char32_t{0};
          const auto n = decode_utf8(text, stop, c);
          if (!is_whitespace(c)) break;
          stop += n;
        }
        at = stop;
      }
      if (start_offset < start) out.push_back({start_offset, start, -1});
      out.push_back({start, stop, token.id});
      start_offset = stop;
    }
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

} // namespace troupe::hf
