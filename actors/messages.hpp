#pragma once
// The plain values actors send each other (besides the engine's own
// scheduler_output / step_result / request_update).

#include "actors/http/http_server.hpp"
#include "engine/core/request.hpp"
#include "engine/core/scheduler_output.hpp"
#include "engine/tokenizer/chat_template.hpp"

#include <caf/actor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

using steady_time = std::chrono::steady_clock::time_point;

/// Text to encode: a completion prompt, or chat messages to render first.
struct encode_job {
  bool chat = false;
  std::string text;                   ///< !chat: the prompt
  std::vector<chat_message> messages; ///< chat
  /// > 0: the most tokens the prompt may have. A long text is counted in
  /// pieces first and not encoded once it is sure to have more (encoded::at_least).
  std::int64_t max_tokens = 0;
  /// Whether the model's BOS opens the tokens; none: the default, yes for a
  /// prompt, no for chat (the template writes what it needs).
  std::optional<bool> add_special_tokens;
  bool add_generation_prompt = true; ///< chat: end with the assistant's opening
  std::string tools_json;            ///< chat: the template's tools (a JSON array), "" for none
  std::string template_kwargs_json;  ///< chat: more template variables (chat_template_kwargs), "" for none

  /// The bytes the tokenizer reads (the text, or every message's content).
  auto num_bytes() const -> std::size_t {
    std::size_t n = text.size();
    for (const auto& m : messages) n += m.content.size();
    return n;
  }
};

/// The tokens of an encode_job, or why there are none (a 400 for the client).
struct encoded {
  std::vector<token_id> tokens;
  std::string error;
  /// > 0: counting stopped here, past the job's max_tokens; tokens is empty.
  std::int64_t at_least = 0;
  /// chat: the rendered prompt ends inside a thinking block (<think>).
  bool opens_thinking = false;

  /// The prompt's tokens, or at least that many when counting stopped.
  auto num_tokens() const -> std::int64_t {
    return at_least > 0 ? at_least : static_cast<std::int64_t>(tokens.size());
  }
};

/// One step, shared between the scheduler (which applies its result) and
/// the executor (which runs it): sent by pointer, never copied.
using step_ptr = std::shared_ptr<const scheduler_output>;

/// Token messages on their way from a scheduler to one client: the
/// scheduler holds back its next step while too many are (backpressure from
/// the serving path, not from slow clients: a count drops when the text
/// reaches the connection, not the client).
using delivery_count = http::exchange::delivery_count;

/// A scheduler's answer to a submission: 0 when queued, else an HTTP status
/// (400: can never run here; 429: the queue is full) and the reason.
struct admission {
  int status = 0;
  std::string message;
};

/// One replica as the router sees it (for the autoscaler and /admin).
struct replica_snapshot {
  bool ready = false, alive = false, draining = false, healthy = false;
  std::int64_t running = 0, waiting = 0, in_flight = 0;
  double kv_use = 0, queue_age_s = 0;
};
using fleet_snapshot = std::vector<replica_snapshot>;

/// A replica the autoscaler had started (actors/autoscaler_actor.hpp): its
/// scheduler (a scheduler_actor), the actors to stop when it is retired, or
/// why it could not start.
struct started_replica {
  std::int32_t index = -1;
  caf::actor scheduler;
  std::vector<caf::actor> actors;
  std::string error;
};

} // namespace troupe
