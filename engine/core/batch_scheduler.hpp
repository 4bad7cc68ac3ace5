#pragma once
// Continuous batching over one executor (Orca, Yu et al., OSDI'22; vLLM v1),
// with stall-free batching (Sarathi-Serve, Agrawal et al., OSDI'24): each
// step takes running decodes first, then running requests' next prefill
// chunks, then admits waiting requests in the order the scheduling policy
// gives, while the token budget, max_num_seqs and KV blocks allow. When a
// running request needs a block and none is available, the policy picks a
// victim to preempt: its blocks are released and it is recomputed later, the
// prefix cache permitting, or (preemption by swap) its KV is first copied to
// host swap space and copied back at readmission. Deterministic: time (`now_s`) is an argument; no randomness.

#include "engine/core/host_block_pool.hpp"
#include "engine/core/kv_cache_manager.hpp"
#include "engine/core/prefill_pacer.hpp"
#include "engine/core/request.hpp"
#include "engine/core/scheduler_output.hpp"
#include "engine/core/finish_reason.hpp"
#include "policies/api/scheduling.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe {

/// What preemption does with the victim's KV (vLLM's preemption_mode).
enum class preemption_mode : std::uint8_t {
  recompute, ///< drop it; readmission recomputes prompt ++ output
  swap,      ///< copy it to host blocks, and back at readmission; recompute when they run out
};

struct scheduler_limits {
  std::int32_t max_num_seqs = 256;            ///< running requests at once, >= 1
  std::int32_t max_num_batched_tokens = 2048; ///< tokens per step, >= 1
  std::int32_t max_model_len = 2048;          ///< prompt + output, at most
  std::int32_t max_waiting_requests = 4096;   ///< queued beyond this: refused (429)
  std::int64_t max_waiting_tokens = 1 << 22;  ///< prompt tokens queued, at most
  std::int32_t max_input_tokens = 0;          ///< per request; 0: max_model_len
  std::int32_t max_output_tokens = 0;         ///< per request; 0: no limit but the context
  preemption_mode preemption = preemption_mode::recompute;
  std::int32_t num_host_blocks = 0;           ///< swap space: this scheduler's host blocks
  block_id first_host_block = 0;              ///< ... named [first, first + num_host_blocks)
  /// A request's prefill chunk is at most this many tokens a step (0: the
  /// budget), as vLLM's long_prefill_token_threshold: long prompts then
  /// leave room in every step for newly admitted requests.
  std::int32_t long_prefill_token_threshold = 0;
  /// Requests whose prefill spans steps (partial prefills) running at once,
  /// at most (0: no limit), as vLLM's max_num_partial_prefills. A waiting
  /// request that would be one more is passed over for one that fits in a
  /// step, so a flood of long prompts cannot hold every step's budget.
  std::int32_t max_num_partial_prefills = 0;
  /// A step that decodes takes prefill tokens costing about this many
  /// decode-only steps, as measured (prefill_pacer), and a running prefill
  /// leaves half the rest to waiting requests; 0: no pacing. The server's
  /// default is 1: streams keep half their token rate or more while a long
  /// prompt prefills.
  double prefill_chunk_cost = 0;
};

/// What one step did for one request: its new token, and whether it ended.
struct request_update {
  request_id id = 0;
  std::optional<sample_result> token; ///< none: an abort without a token
  finish_reason finished = finish_reason::none;
  std::vector<sample_result> prompt_logprobs; ///< with the first token: sampled_token's
  /// With the first token: the prompt's tokens found in the prefix cache at
  /// admission, and those it then wrote there (its new full blocks); -1 on later updates.
  std::int32_t num_cached_tokens = -1;
  std::int32_t num_cache_written_tokens = -1;
};

/// The answer to submit(): 0 when queued, else an HTTP status and why.
struct submit_result {
  int status = 0; ///< 400: can never run here; 429: the queue is full
  std::string reason;
};

class batch_scheduler {
public:
  /// `kv` and `policy` must outlive the scheduler. eos_ids end a request
  /// unless it sets ignore_eos.
  batch_scheduler(const scheduler_limits& limits, kv_cache_manager& kv, policy::scheduling_policy& policy,
                  std::vector<token_id> eos_ids);

  /// Why `r` can never run here ("" when it can): empty prompt, over the
  /// input or output limits or the context, or more blocks than the pool holds.
  [[nodiscard]] auto check(const request& r) const -> std::string;
  /// Queues `r` (its id must be new) unless check() refuses it (400) or the
  /// bounded waiting queue is full (429). Refused, its matched_blocks are
  /// the caller's to release.
  [[nodiscard]] auto submit(request r) -> submit_result;
  /// Ends a request in any state now and releases its blocks; false if
  /// unknown or already ended. The executor hears of it next step.
  auto abort(request_id id) -> bool;

  /// The next step at time now_s; empty (no scheduled chunks) when nothing
  /// can run. Each call must be followed by update() with the executor's
  /// result before the next schedule().
  auto schedule(double now_s) -> scheduler_output;
  /// The same into `out` (emptied first), reusing its buffers.
  void schedule(double now_s, scheduler_output& out);
  /// Applies a step's result: advances computed tokens, publishes full
  /// blocks to the prefix cache, appends samples, and finishes requests on
  /// EOS / stop token ids / max_tokens / max_model_len.
  auto update(const scheduler_output& step, const step_result& result) -> std::vector<request_update>;
  /// The same into `updates` (emptied first), reusing its buffer.
  void update(const scheduler_output& step, const step_result& result, std::vector<request_update>& updates);
  /// How long the last step took (after its update()): what paces prefill
  /// against decodes (scheduler_limits::prefill_chunk_cost). The server
  /// passes the wall clock's, the simulator its cost model's, a replay the
  /// step log's: the schedule is deterministic in them.
  void observe_step(double seconds);
  auto pacer() const -> const prefill_pacer& { return pacer_; }

  auto num_waiting() const -> std::int64_t { return static_cast<std::int64_t>(waiting_.size()); }
  auto num_running() const -> std::int64_t { return static_cast<std::int64_t>(running_.size()); }
  /// Prompt tokens still to prefill: the waiting requests' and the running
  /// ones' uncomputed prompt (what a token-aware router counts).
  auto prefill_tokens() const -> std::int64_t;
  /// Tokens the running requests may still generate (to their length limits).
  auto decode_tokens() const -> std::int64_t;
  /// The earliest arrival_s of the waiting requests; +infinity when none wait.
  auto oldest_waiting_arrival() const -> double;
  /// Something to schedule, or ended requests the executor has not heard of.
  auto has_work() const -> bool { return !waiting_.empty() || !running_.empty() || !finished_.empty(); }
  auto num_preemptions() const -> std::int64_t { return num_preemptions_; }
  /// Admissions that shared a group member's prompt blocks, and the prompt
  /// tokens they did not compute for it.
  auto num_forks() const -> std::int64_t { return num_forks_; }
  auto num_forked_tokens() const -> std::int64_t { return num_forked_tokens_; }
  /// Tokens a grammar forced after a sampled one, appended with it (jump-forward).
  auto num_jump_forward_tokens() const -> std::int64_t { return num_jump_forward_tokens_; }
  /// Preemptions that swapped (of num_preemptions()), and requests swapped out now.
  auto num_swap_outs() const -> std::int64_t { return num_swap_outs_; }
  auto num_swapped() const -> std::int64_t { return num_swapped_; }
  auto host_blocks() const -> const host_block_pool& { return host_; }
  auto limits() const -> const scheduler_limits& { return limits_; }
  auto kv() const -> const kv_cache_manager& { return kv_; }
  /// The request's state, or nullptr when unknown (never seen, or ended).
  auto find(request_id id) const -> const request*;

  /// Aborts (TROUPE_CHECK) when the queues disagree with the requests'
  /// states, a request is in two queues, the budgets were exceeded, or a
  /// block's references at the source differ from the tables that list it
  /// (forks share blocks: the accounting is exact). For tests.
  void check_invariants() const;

private:
  /// The first update's prefix-cache figures (request_update::num_cached_tokens).
  void cache_figures(const request& r, request_update& u) const;
  auto find_mut(request_id id) -> request*;
  auto stops_at(const request& r, token_id t) const -> bool; ///< t is a stop token id, or an EOS it heeds
  auto view_of(const request& r) const -> policy::request_view;
  void preempt(request& r, scheduler_output& out);
  void drop_kv(request& r);
  void return_host_blocks(request& r);
  auto reclaim_waiting(const request* keep) -> bool;
  /// A waiting group member's start: forks the prompt's KV of a member that
  /// has computed it (true), or finds a lower choice still computing it
  /// (false: it waits); true with nothing done when neither.
  auto fork_or_wait(request& r) -> bool;
  void end(request& r, request_state state);
  void add_chunk(request& r, std::int32_t num_new, scheduler_output& out);
  auto admit(double now_s, std::int64_t& budget, scheduler_output& out) -> void;
  /// The policy's order of the waiting requests, for admit().
  auto admission_order(double now_s) -> std::vector<std::size_t>;
  /// A request's first KV at admission: its prompt's cache hits (its output too after preemption).
  void begin_kv(request& r);
  /// Grows r's blocks for num_new tokens; false where they do not fit, blocking the queue.
  auto grow_for_admission(request& r, std::int32_t num_new) -> bool;
  /// Runs an admitted request: its first chunk, within the budget.
  void start_running(request& r, std::int32_t num_new, std::int64_t& budget, scheduler_output& out);
  /// The running requests' chunks, decodes or prefills, within the budget
  /// and `cap` tokens in all; with `share`, each prefill takes at most half
  /// of the budget left (waiting requests get the rest). Preempts where
  /// blocks run out.
  void schedule_running(double now_s, bool decodes, std::int64_t& budget, std::int64_t cap, bool share,
                        scheduler_output& out, bool& preempted);
  /// The tokens `r` runs this step: what it has left, within the budget and
  /// long_prefill_token_threshold.
  auto chunk_of(const request& r, std::int64_t budget) const -> std::int32_t;

  scheduler_limits limits_;
  kv_cache_manager& kv_;
  policy::scheduling_policy& policy_;
  bool reports_service_; ///< the policy wants on_served()
  std::vector<token_id> eos_ids_;
  std::unordered_map<request_id, std::unique_ptr<request>> requests_;
  /// Ended while their step was under way: alive until its update(), as step_requests_ names them.
  std::vector<std::unique_ptr<request>> ended_;
  std::vector<request*> step_requests_; ///< the step under way's chunks' requests, in order (until its update())
  std::vector<request*> waiting_;    ///< waiting or preempted, in arrival order (preempted ones first)
  std::vector<request*> running_;    ///< in admission order
  std::vector<request_id> finished_; ///< for the next step's executor
  std::int64_t waiting_tokens_ = 0;  ///< prompt tokens of waiting_
  std::int64_t num_preemptions_ = 0;
  std::int64_t num_forks_ = 0;
  std::int64_t num_forked_tokens_ = 0;
  std::int64_t num_jump_forward_tokens_ = 0;
  /// The live members of each fork group (request::group).
  std::unordered_map<std::uint64_t, std::vector<request*>> groups_;
  std::int64_t num_swap_outs_ = 0;
  std::int64_t num_swapped_ = 0;
  host_block_pool host_;
  prefill_pacer pacer_;
  std::int64_t step_decode_tokens_ = 0;  ///< the last schedule()'s tokens of decoding requests
  std::int64_t step_prefill_tokens_ = 0; ///< and of prefill chunks
  std::int64_t step_admitted_tokens_ = 0; ///< of those, newly admitted requests' chunks
  std::uint64_t out_step_ = 0; ///< counts schedule() calls
  /// After an admission failed for want of blocks: the blocks available
  /// then, and the queue's version; admission is retried only once either
  /// changes (retrying re-matches prefixes, counting cache hits each time).
  std::int64_t blocked_available_ = -1;
  std::uint64_t blocked_version_ = 0;
  std::uint64_t queue_version_ = 0; ///< bumped whenever the waiting queue gains a request
  std::vector<request*> sampling_scratch_; ///< update(): the sampling chunks' requests
};

} // namespace troupe
