#include "engine/tokenizer/output_processor.hpp"


#include "base/utf8.hpp"

#include <algorithm>

namespace troupe {

output_processor::output_processor(const tokenizer& tok, const sampling_params& params,
                                   std::vector<token_id> eos_ids, bool at_text_start, std::vector<token_id> shown_controls)
  : params_(params), eos_ids_(std::move(eos_ids)), detok_(tok, at_text_start) {
  if (!shown_controls.empty()) detok_.show_controls(std::move(shown_controls));
  for (const auto& s : params_.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
}

auto output_processor::finish(finish_reason r) -> output_delta {
  held_ += detok_.flush();
  output_delta d{std::move(held_), r, {}, detok_.take_settled()};
  held_.clear();
  return d;
}

auto output_processor::on_token(token_id id) -> output_delta {
  ++num_tokens_;
  const auto is = [id](const std::vector<token_id>& v) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  if (is(params_.stop_token_ids) || (!params_.ignore_eos && is(eos_ids_))) {
    auto d = finish(finish_reason::stop);
    d.token_bytes.emplace_back(); // the stop token shows no text
    return d;
  }

  held_ += detok_.push(id); // ids past the tokenizer's vocabulary carry no text

  // The earliest match wins (the longest on a tie): text before it is shown.
  const std::string* hit = nullptr;
  std::size_t hit_pos = std::string::npos;
  for (const auto& s : params_.stop) {
    const auto pos = held_.find(s);
    if (pos < hit_pos || (pos == hit_pos && pos != std::string::npos && s.size() > hit->size())) {
      hit = &s;
      hit_pos = pos;
    }
  }
  if (hit != nullptr) {
    detok_.flush(); // settles any byte held back; its text is past the stop
    output_delta d{held_.substr(0, hit_pos), finish_reason::stop, *hit, detok_.take_settled()};
    held_.clear();
    return d;
  }
  if (num_tokens_ >= params_.max_tokens) return finish(finish_reason::length);

  // Release all but the last max_stop_len - 1 bytes, on a character boundary.
  const std::size_t keep = max_stop_len_ > 0 ? max_stop_len_ - 1 : 0;
  if (held_.size() <= keep) return {{}, finish_reason::none, {}, detok_.take_settled()};
  std::size_t cut = held_.size() - keep;
  while (cut > 0 && cut < held_.size() && is_utf8_continuation(static_cast<unsigned char>(held_[cut]))) --cut;
  output_delta d{held_.substr(0, cut), finish_reason::none, {}, detok_.take_settled()};
  held_.erase(0, cut);
  return d;
}

} // namespace troupe
