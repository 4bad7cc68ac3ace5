#pragma once
// Turns one request's sampled tokens into streamed text and decides when it
// is finished: EOS and stop token ids, stop strings, max_tokens.

#include "engine/core/finish_reason.hpp"
#include "engine/core/sampling_params.hpp"
#include "engine/tokenizer/detokenizer.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {



struct output_delta {
  std::string text;                        ///< new text, valid UTF-8, maybe empty
  finish_reason finished = finish_reason::none;
  std::string stop_reason;                 ///< the stop string matched, if any
  /// The tokens settled by this call, oldest first, one entry each: its own
  /// bytes (incremental_detokenizer::take_settled); a stop or EOS token's is
  /// "". Every token fed is settled once, by the finished delta at the latest.
  /// Without a stop string, joined over the request they are its text.
  std::vector<std::string> token_bytes;
};

class output_processor {
public:
  /// eos_ids: the model's end tokens (ignored when params.ignore_eos).
  /// at_text_start: the output opens a text (no prompt text before it).
  /// shown_controls: special tokens whose piece the text shows
  /// (incremental_detokenizer::show_controls).
  output_processor(const tokenizer& tok, const sampling_params& params,
                   std::vector<token_id> eos_ids, bool at_text_start, std::vector<token_id> shown_controls = {});

  /// Feeds the next sampled token. A stop string is never shown, even in
  /// part: text that could still begin one is held back until it cannot.
  /// Stop and EOS tokens add no text. After a finished delta, do not call.
  auto on_token(token_id id) -> output_delta;

  auto num_tokens() const -> std::int32_t { return num_tokens_; }

  /// The bytes `id` would add if it came next (for top logprobs):
  /// incremental_detokenizer::token_bytes.
  auto token_bytes(token_id id) const -> std::string { return detok_.token_bytes(id); }

private:
  auto finish(finish_reason r) -> output_delta;

  sampling_params params_;
  std::vector<token_id> eos_ids_;
  incremental_detokenizer detok_;
  std::string held_;              ///< text that might still start a stop string
  std::size_t max_stop_len_ = 0;
  std::int32_t num_tokens_ = 0;
};

} // namespace troupe
