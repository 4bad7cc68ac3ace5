#pragma once
// tokenizer.json's BPE model: vocabulary, ranked merges, byte_fallback,
// unk_token (fused or not), continuing_subword_prefix / end_of_word_suffix,
// ignore_merges. Merging follows HF's Word::merge_all: the lowest-ranked
// adjacent pair first, the leftmost among equals, until none applies.
//
// With a byte-level pre-tokenizer the vocabulary is held as raw bytes
// ("Ġthe" as " the"), so words are never mapped to GPT-2's alphabet and
// back: the same ids come out, with less work.

#include "engine/tokenizer/hf/json.hpp"
#include "base/types.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe::hf {

/// Transparent hashing, so that string_view keys find std::string ones.
struct string_hash {
  using is_transparent = void;
  auto operator()(std::string_view s) const noexcept -> std::size_t { return std::hash<std::string_view>{}(s); }
};

/// A BPE model as plain values: what tokenizer.json's "model" says, or
/// what a GGUF file's vocabulary and merges say. Strings are as the file
/// writes them (GPT-2's alphabet for a byte-level vocabulary).
struct bpe_spec {
  std::vector<std::pair<std::string, token_id>> vocab;
  std::vector<std::pair<std::string, std::string>> merges; ///< by rank
  std::optional<std::string> unk_token, continuing_subword_prefix, end_of_word_suffix;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false; ///< a word in the vocabulary is its token, unmerged
};

/// tokenizer.json's "model" (type BPE) as a bpe_spec; throws hf_error.
auto parse_bpe_spec(dom::element model) -> bpe_spec;

class bpe {
public:
  /// `byte_level`: hold the vocabulary as bytes. Throws hf_error naming a
  /// merge or token the vocabulary lacks.
  bpe(bpe_spec spec, bool byte_level);
  ~bpe();

  /// Appends the ids of one word (bytes when byte-level, else text).
  /// Thread-safe; words under 256 bytes are cached.
  auto tokenize(std::string_view word, std::vector<token_id>& out) const -> void;

  /// Every vocabulary entry as written in the file (id order not implied).
  auto vocab() const -> const std::vector<std::pair<std::string, token_id>>& { return file_vocab_; }
  auto unk_id() const -> token_id { return unk_id_; }
  auto byte_fallback() const -> bool { return byte_fallback_; }

private:
  auto lookup(std::string_view key) const -> token_id;
  auto merge_word(std::string_view word, std::vector<token_id>& out) const -> void;
  auto merge_all(std::vector<token_id>& ids) const -> void;
  auto find_merge(token_id a, token_id b, std::uint32_t& rank, token_id& merged) const -> bool;

  std::vector<std::pair<std::string, token_id>> file_vocab_;
  std::unordered_map<std::string, token_id, string_hash, std::equal_to<>> vocab_; ///< internal form
  std::array<token_id, 256> byte_ids_{};     ///< byte_level: the id of each single byte, or -1
  std::array<token_id, 256> fallback_ids_{}; ///< byte_fallback: <0xNN>'s id, or -1
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  token_id unk_id_ = -1;
  std::string prefix_, suffix_;

  // Merges: an open-addressing table from (a << 32 | b) to rank and result.
  struct merge_slot {
    std::uint64_t key = ~std::uint64_t{0};
    std::uint32_t rank = 0;
    token_id merged = -1;
  };
  std::vector<merge_slot> merges_;
  std::uint64_t merge_mask_ = 0;

  struct cache_shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<token_id>, string_hash, std::equal_to<>> words;
  };
  mutable std::array<cache_shard, 16> cache_;
};

} // namespace troupe::hf
