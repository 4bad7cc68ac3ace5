#pragma once
// One request as the scheduler core tracks it.

#include "engine/core/sampling_params.hpp"
#include "base/types.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

struct kv_entry; // engine/core/kv_cache_manager.hpp

///   waiting ──admit──▶ running ──EOS / stop id / length──▶ finished
///                       │   ▲
///              preempt  ▼   │ admit: recomputes (prefix cache permitting),
///                     preempted   or, preempted by swap, copies its KV back
///   any state ──abort (client gone, stop string, shutdown)──▶ aborted
enum class request_state : std::uint8_t { waiting, running, preempted, finished, aborted };

struct request {
  // What every step reads and writes comes first: two cache lines (the
  // sampling parameters, read once a request ends, come after).
  request_id id = 0;
  request_state state = request_state::waiting;
  bool known_to_executor = false; ///< sent once as new_request_data
  /// Set by submit(): a sampled token can end it early (stop token ids, or
  /// EOS ids it does not ignore); else only the length limit does.
  bool may_stop = true;
  std::int32_t num_computed_tokens = 0; ///< of prompt ++ output, in the KV cache
  std::int32_t num_cached_tokens = 0;   ///< of those, found in the prefix cache at admission
  std::int32_t num_blocks_sent = 0;    ///< of its block table, already sent to the executor
  std::uint64_t scheduled_in_step = 0; ///< the scheduler's step counter when last scheduled
  /// Its blocks at the KV cache manager while tracked there (set and
  /// cleared by the scheduler), else nullptr.
  kv_entry* kv = nullptr;
  std::vector<token_id> prompt;  ///< non-empty
  std::vector<token_id> output;  ///< sampled so far
  /// Set by submit(): output tokens at which it ends for length (max_tokens,
  /// or what the context leaves).
  std::int32_t output_limit = 0;

  sampling_params sampling;      ///< max_tokens already resolved and valid
  std::uint64_t tenant = 0;      ///< prefix-cache namespace (and the fairness unit when account is 0)
  std::uint64_t account = 0;     ///< the fairness unit (vtc's tenant); 0: `tenant`
  double weight = 1.0;           ///< > 0: its account's share under vtc
  std::int32_t priority = 0;     ///< larger is more important
  double arrival_s = 0;          ///< on the caller's clock (policies age by it)
  std::int32_t output_len_hint = -1; ///< predicted output tokens, -1: none
  /// 0: alone. Else its fork group: the n choices of one prompt (n > 1,
  /// best_of), submitted together with the same prompt and tenant. A
  /// choice admitted while another has computed the prompt shares that
  /// one's blocks of it (kv_cache_manager::fork); one admitted while a
  /// lower choice still computes it, or waits to, waits for that.
  std::uint64_t group = 0;
  std::int32_t choice = 0; ///< its index in the group
  /// Its prompt's cached blocks when the match was made before submission
  /// (by the memory manager, referenced for it); adopted by submit().
  std::vector<block_id> matched_blocks;
  /// While preempted by swap: the host blocks holding the KV of its first
  /// num_computed_tokens tokens, in table order. Empty otherwise.
  std::vector<block_id> host_blocks;

  auto num_tokens() const -> std::int32_t {
    return static_cast<std::int32_t>(prompt.size() + output.size());
  }
};

} // namespace troupe
