#pragma once
// Streams token ids out as text that is always valid UTF-8.

#include "engine/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// Turns a stream of generated ids into text pieces. Bytes of byte-fallback
/// pieces are held back until they complete a UTF-8 character; a sequence that
/// can never complete becomes U+FFFD. "▁" becomes a space, except the very
/// first one when `at_text_start` (the text opens with it). Control tokens
/// produce nothing. Concatenating every push() and flush() equals
/// tokenizer::decode of the same ids (plus a leading space when !at_text_start
/// and the first piece starts with "▁"). A byte run ends at the next non-byte
/// id, control ids included, exactly as in sentencepiece's decoder; each byte
/// that starts no valid character becomes one U+FFFD. Ids outside the
/// vocabulary are ignored. The model's denormalizer (if any) is not applied.
class incremental_detokenizer {
public:
  incremental_detokenizer(const tokenizer& tok, bool at_text_start);

  /// Text completed by this id; often empty mid-character. O(piece length).
  auto push(token_id id) -> std::string;

  /// Whatever is held back, incomplete bytes as U+FFFD; call once at the end.
  auto flush() -> std::string;

  /// The bytes `id` itself would add if pushed now: a byte piece's byte (maybe
  /// not UTF-8 alone), a piece's text with "▁" as a space (its leading one
  /// dropped by the same rule as push), the unknown surface, "" for control
  /// tokens and ids outside the vocabulary. O(piece length).
  auto token_bytes(token_id id) const -> std::string;

  /// The pushed tokens settled since the last call, oldest first, one entry
  /// per push: its share of the returned text. A byte piece settles when its
  /// character is decided: its byte, or U+FFFD (EF BF BD) when the byte starts
  /// no character (so joined, the entries are exactly the text returned); any
  /// other id settles at once. Every push is settled by flush() at the latest.
  auto take_settled() -> std::vector<std::string>;

private:
  /// Moves whole characters (or U+FFFD for impossible bytes) from pending_ to
  /// out; with `run_ended`, an incomplete tail becomes U+FFFD too.
  auto drain(std::string& out, bool run_ended) -> void;

  const tokenizer* tok_;
  bool at_start_;             ///< a leading "▁" would still be dropped
  bool bos_ws_seen_ = false;  ///< the previous piece had its "▁" dropped
  bool emitted_ = false;      ///< some text has been returned
  std::string pending_; ///< bytes of an unfinished UTF-8 character, one per byte piece
  std::vector<std::string> settled_; ///< see take_settled()
  /// Per pending byte: ids outside the vocabulary pushed after it, which
  /// settle (as "") right after it, keeping the settled entries in push order.
  std::vector<std::uint32_t> skipped_after_;
};

} // namespace troupe
