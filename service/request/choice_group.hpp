#pragma once
// A request's choices: one, or n (best_of: that many candidates), each its
// own request at the replica (ids id, id + 1, ...: a fork group there,
// sharing the prompt's KV). Each choice's stream writer turns its tokens
// into text and writes it; best_of ranks them by their mean token logprob
// once all have ended.

#include "engine/core/request.hpp"
#include "service/request/stream_writer.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

struct choice_state {
  std::optional<stream_writer> writer; ///< its text, from its tokens on once the prompt is encoded
  finish_reason finished = finish_reason::none; ///< none while it runs
  double logprob_sum = 0; ///< of its tokens: best_of keeps the highest means
};

class choice_group {
public:
  /// `count` choices, each writing `body`'s answer in `protocol`'s shape
  /// with the head's id and its own index.
  void open(std::size_t count, const api::wire_protocol& protocol, const api::generation_request& body,
            const api::response_head& head, std::string_view tool_parser, const api::reasoning_seal* seal);

  auto size() const -> std::size_t { return choices_.size(); }
  auto operator[](std::size_t i) -> choice_state& { return choices_[i]; }
  auto begin() { return choices_.begin(); }
  auto end() { return choices_.end(); }
  /// The first choice's writer: the stream's framing, its usage and head.
  auto writer() -> stream_writer& { return *choices_.front().writer; }
  /// Tokens generated, over the choices.
  auto completion_tokens() const -> std::int64_t;
  auto all_finished() const -> bool;
  /// n choices, each ended: the whole response (best_of: the n with the
  /// highest mean token logprob, best first, as `protocol` combines them),
  /// or the stream's tail after `batch`.
  auto answer(const api::wire_protocol& protocol, std::size_t n, std::string batch) -> std::string;
  /// A retry from the start: every choice's text and state forgotten.
  void restart();

private:
  std::vector<choice_state> choices_;
};

/// Choice i of a request of several (n > 1, best_of): the same prompt, the
/// next id, and a seed stream of its own (choice 0 keeps the request's seed,
/// so it answers as the request alone would; without a seed, each choice's
/// id seeds it at the executor).
auto choice_request(const request& first, std::size_t i) -> request;

} // namespace troupe
