#include "engine/tokenizer/detokenizer.hpp"

#include "base/utf8.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace troupe {
namespace {

constexpr auto replacement_char = std::string_view{"\xEF\xBF\xBD"}; // U+FFFD

// The rules below are sentencepiece's DecodeUTF8 (util.cc), so that pending
// bytes resolve exactly as SentencePieceProcessor::Decode resolves them.

/// Bytes in the character a lead byte opens; 0 when it opens none.
auto sequence_length(unsigned char lead) -> std::size_t { return utf8_sequence_length(lead); }

/// Whether some code point in [lo, hi] is one UTF-8 may encode in n bytes.
auto range_has_valid(std::uint32_t lo, std::uint32_t hi, std::size_t n) -> bool {
  constexpr std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
  lo = std::max(lo, min_for_length[n]);
  hi = std::min<std::uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return false;
  return !(lo >= 0xD800 && hi <= 0xDFFF); // not all surrogates
}

/// For bytes.size() <= n: whether bytes can begin a valid n-byte character
/// (when bytes.size() == n, whether they are one).
auto can_be_character(std::string_view bytes, std::size_t n) -> bool {
  constexpr unsigned lead_mask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  auto cp = std::uint32_t{static_cast<unsigned char>(bytes[0]) & lead_mask[n]};
  for (std::size_t i = 1; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (!is_utf8_continuation(b)) return false;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  const auto missing_bits = 6 * static_cast<unsigned>(n - bytes.size());
  const auto lo = cp << missing_bits;
  return range_has_valid(lo, lo | ((1u << missing_bits) - 1), n);
}

} // namespace

incremental_detokenizer::incremental_detokenizer(const tokenizer& tok, bool at_text_start)
    : tok_(&tok),
      at_start_(at_text_start && tok.leading_space() != leading_space_rule::keep) {}

auto incremental_detokenizer::hold(std::string_view bytes) -> void {
  const auto push_number = first_ + unsettled_.size();
  unsettled_.push_back({{}, bytes.size()});
  pending_.append(bytes);
  owners_.insert(owners_.end(), bytes.size(), push_number);
}

auto incremental_detokenizer::settle() -> void {
  auto n = std::size_t{0};
  while (n < unsettled_.size() && unsettled_[n].num_undecided_bytes == 0) {
    settled_.push_back(std::move(unsettled_[n].share));
    ++n;
  }
  unsettled_.erase(unsettled_.begin(), unsettled_.begin() + static_cast<std::ptrdiff_t>(n));
  first_ += n;
}

auto incremental_detokenizer::drain(std::string& out, bool run_ended) -> void {
  auto done = std::size_t{0};
  const auto decide = [&](std::size_t byte, std::string_view text) {
    auto& owner = unsettled_[owners_[byte] - first_];
    owner.share.append(text);
    --owner.num_undecided_bytes;
  };
  while (done < pending_.size()) {
    const auto rest = std::string_view{pending_}.substr(done);
    const auto n = sequence_length(static_cast<unsigned char>(rest[0]));
    if (n != 0 && rest.size() >= n && can_be_character(rest.substr(0, n), n)) {
      out.append(rest.substr(0, n));
      for (std::size_t i = 0; i < n; ++i) decide(done + i, rest.substr(i, 1));
      done += n;
    } else if (n != 0 && rest.size() < n && !run_ended && can_be_character(rest, n)) {
      break; // may still complete
    } else {
      out.append(replacement_char); // this byte starts no character: skip one
      decide(done, replacement_char);
      done += 1;
    }
  }
  pending_.erase(0, done);
  owners_.erase(owners_.begin(), owners_.begin() + static_cast<std::ptrdiff_t>(done));
  settle();
}

void incremental_detokenizer::show_controls(std::vector<token_id> ids) {
  std::sort(ids.begin(), ids.end());
  shown_ = std::move(ids);
}

auto incremental_detokenizer::shown(token_id id) const -> bool {
  return !shown_.empty() && std::binary_search(shown_.begin(), shown_.end(), id);
}

auto incremental_detokenizer::push(token_id id) -> std::string {
  auto out = std::string{};
  if (id < 0 || id >= tok_->vocab_size()) { // no text, and the byte run goes on
    hold({});
    settle();
    return out;
  }
  if (tok_->is_byte(id)) {
    hold(tok_->token_surface(id));
    drain(out, false);
    emitted_ = emitted_ || !out.empty();
    return out;
  }
  if (tok_->is_control(id) && !shown(id)) { // ends the byte run, as in sentencepiece's decoder
    drain(out, true);
    hold({});
    settle();
    emitted_ = emitted_ || !out.empty();
    return out;
  }
  // Held bytes come out before this token (completed by it, or as U+FFFD:
  // a token of whole characters cannot continue them).
  // Mirrors SentencePieceProcessor::Decode's is_bos_ws / bos_ws_seen.
  if (bos_ws_seen_ || emitted_ || !pending_.empty()) at_start_ = false;
  bos_ws_seen_ = false;
  const auto drops_space = at_start_ && !tok_->is_unknown(id) && tok_->token_surface(id).starts_with(' ');
  const auto own = token_bytes(id);
  if (drops_space) bos_ws_seen_ = tok_->leading_space() == leading_space_rule::drop_first;
  hold(own);
  drain(out, false);
  emitted_ = emitted_ || !out.empty();
  return out;
}

auto incremental_detokenizer::token_bytes(token_id id) const -> std::string {
  if (id < 0 || id >= tok_->vocab_size()) return {};
  if (tok_->is_control(id)) return shown(id) ? std::string(tok_->piece(id)) : std::string();
  auto surface = tok_->token_surface(id);
  if (tok_->is_byte(id) || tok_->is_unknown(id)) return std::string(surface);
  // push drops the leading space only while nothing was emitted, no space was
  // just dropped, and no held byte is about to come out.
  const auto at_start = at_start_ && !bos_ws_seen_ && !emitted_ && pending_.empty();
  if (at_start && surface.starts_with(' ')) surface.remove_prefix(1);
  return std::string(surface);
}

auto incremental_detokenizer::take_settled() -> std::vector<std::string> {
  return std::exchange(settled_, {});
}

auto incremental_detokenizer::flush() -> std::string {
  auto out = std::string{};
  drain(out, true);
  emitted_ = emitted_ || !out.empty();
  return out;
}

} // namespace troupe
