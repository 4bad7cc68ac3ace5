#pragma once
// Streams token ids out as text that is always valid UTF-8.

#include "engine/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// Turns a stream of generated ids into text pieces, for both tokenizer
/// kinds: each id adds its tokenizer::token_surface bytes. Bytes are held
/// back until they complete a UTF-8 character (a byte-fallback piece's byte,
/// or a byte-level token's partial character); a sequence that can never
/// complete becomes U+FFFD, one per byte that starts no valid character, as
/// sentencepiece's decoder does. The space opening the text is dropped by
/// the tokenizer's leading_space() rule, only when `at_text_start`. Control
/// (special) tokens produce nothing and end a run of held bytes. Ids outside
/// the vocabulary are ignored.
///
/// Concatenating every push() and flush() equals tokenizer::decode of the
/// same ids (plus a leading space when !at_text_start and the first piece
/// opens with one) whenever the bytes are valid UTF-8. Where they are not,
/// U+FFFD may be counted differently from decode: HF's ByteFallback decoder
/// makes every byte of a bad run U+FFFD, its ByteLevel decoder one per
/// maximal bad subsequence, and it ignores special tokens inside a run. The
/// model's denormalizer (if any) is not applied.
class incremental_detokenizer {
public:
  incremental_detokenizer(const tokenizer& tok, bool at_text_start);

  /// Control tokens among `ids` add their piece as text from now on ("<tool_call>",
  /// "[TOOL_CALLS]": markers a parser reads), rather than nothing.
  void show_controls(std::vector<token_id> ids);

  /// Text completed by this id; often empty mid-character. O(token length).
  auto push(token_id id) -> std::string;

  /// Whatever is held back, incomplete bytes as U+FFFD; call once at the end.
  auto flush() -> std::string;

  /// The bytes `id` itself would add if pushed now: its token_surface (maybe
  /// not UTF-8 alone), the leading space dropped by the same rule as push;
  /// "" for control tokens and ids outside the vocabulary. O(token length).
  auto token_bytes(token_id id) const -> std::string;

  /// The pushed tokens settled since the last call, oldest first, one entry
  /// per push: its share of the returned text. A token settles when every
  /// one of its bytes is decided: each byte of a complete character goes to
  /// the token that brought it, a U+FFFD (EF BF BD) to the token whose byte
  /// started no character; so joined, the entries are exactly the text
  /// returned. Entries come in push order; every push is settled by flush()
  /// at the latest.
  auto take_settled() -> std::vector<std::string>;

private:
  auto shown(token_id id) const -> bool;
  std::vector<token_id> shown_; ///< sorted
  /// Moves whole characters (or U+FFFD for impossible bytes) from pending_ to
  /// out; with `run_ended`, an incomplete tail becomes U+FFFD too.
  auto drain(std::string& out, bool run_ended) -> void;
  /// Appends one push's bytes to pending_ (owned by a new unsettled entry).
  auto hold(std::string_view bytes) -> void;
  /// Moves the oldest unsettled entries that have no undecided byte to settled_.
  auto settle() -> void;

  struct unsettled {
    std::string share;
    std::size_t num_undecided_bytes = 0;
  };

  const tokenizer* tok_;
  bool at_start_;             ///< a leading space would still be dropped
  bool bos_ws_seen_ = false;  ///< the previous piece had its space dropped
  bool emitted_ = false;      ///< some text has been returned
  std::string pending_;       ///< bytes of an unfinished UTF-8 character
  std::vector<std::size_t> owners_;  ///< per pending byte: its push (index into unsettled_ + first_)
  std::vector<unsettled> unsettled_; ///< pushes not yet settled, oldest first
  std::size_t first_ = 0;            ///< the push number of unsettled_[0]
  std::vector<std::string> settled_; ///< see take_settled()
};

} // namespace troupe
