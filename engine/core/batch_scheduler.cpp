#include "engine/core/batch_scheduler.hpp"

#include "base/check.hpp"

#include <algorithm>
#include <limits>
#include <string>

namespace troupe {

batch_scheduler::batch_scheduler(const scheduler_limits& limits, kv_cache_manager& kv,
                                 policy::scheduling_policy& policy, std::vector<token_id> eos_ids)
  : limits_(limits),
    kv_(kv),
    policy_(policy),
    reports_service_(policy.wants_service_reports()),
    eos_ids_(std::move(eos_ids)),
    host_(limits.preemption == preemption_mode::swap ? limits.num_host_blocks : 0, limits.first_host_block),
    pacer_(limits.prefill_chunk_cost, limits.max_num_batched_tokens) {
  TROUPE_CHECK(limits.max_num_seqs >= 1 && limits.max_num_batched_tokens >= 1 && limits.max_model_len >= 1,
               "scheduler limits must be positive");
}

auto batch_scheduler::check(const request& r) const -> std::string {
  if (r.prompt.empty()) return "the prompt is empty";
  const std::int64_t n = static_cast<std::int64_t>(r.prompt.size());
  const std::int64_t max_input = limits_.max_input_tokens > 0 ? limits_.max_input_tokens : limits_.max_model_len;
  if (n > max_input)
    return "the prompt has " + std::to_string(n) + " tokens, over the limit of " + std::to_string(max_input);
  if (limits_.max_output_tokens > 0 && r.sampling.max_tokens > limits_.max_output_tokens)
    return "max_tokens (" + std::to_string(r.sampling.max_tokens) + ") is over the limit of " +
           std::to_string(limits_.max_output_tokens);
  const std::int64_t total = n + r.sampling.max_tokens;
  if (total > limits_.max_model_len)
    return "prompt (" + std::to_string(n) + " tokens) + max_tokens (" + std::to_string(r.sampling.max_tokens) +
           ") exceeds the model's context of " + std::to_string(limits_.max_model_len) + " tokens";
  // The last sampled token is never computed, so total - 1 positions hold KV;
  // with a sliding window at most the window and a step's chunk at once
  // (and a block the window straddles).
  const auto bs = kv_.options().block_size;
  std::int64_t needed = blocks_for(total - 1, bs);
  if (const auto w = kv_.options().sliding_window_tokens; w > 0)
    needed = std::min(needed, blocks_for(w + static_cast<std::int64_t>(limits_.max_num_batched_tokens), bs) + 1);
  if (needed > kv_.source().capacity())
    return "prompt + max_tokens needs " + std::to_string(needed) + " KV blocks, the cache holds " +
           std::to_string(kv_.source().capacity());
  return {};
}

auto batch_scheduler::submit(request r) -> submit_result {
  if (auto why = check(r); !why.empty()) return {400, std::move(why)};
  TROUPE_CHECK(!requests_.contains(r.id), "request id reused");
  const std::int64_t n = r.num_tokens();
  if (num_waiting() >= limits_.max_waiting_requests || waiting_tokens_ + n > limits_.max_waiting_tokens)
    return {429, "the server's queue is full; retry later"};
  auto owned = std::make_unique<request>(std::move(r));
  owned->state = request_state::waiting;
  const auto& sp = owned->sampling;
  owned->may_stop = !sp.stop_token_ids.empty() || (!sp.ignore_eos && !eos_ids_.empty());
  owned->output_limit = std::min(sp.max_tokens, limits_.max_model_len - static_cast<std::int32_t>(owned->prompt.size()));
  // Room for its output up front (up to a bound): growing token by token
  // reallocated it some eight times per request.
  owned->output.reserve(static_cast<std::size_t>(std::min(owned->sampling.max_tokens, 1024)));
  if (!owned->matched_blocks.empty()) {
    // Matched by the memory manager: the references are this request's now.
    owned->num_cached_tokens = kv_.begin_matched(owned->id, owned->tenant, owned->priority, owned->prompt,
                                                 owned->matched_blocks);
    owned->kv = kv_.entry_of(owned->id);
    owned->num_computed_tokens = owned->num_cached_tokens;
    owned->matched_blocks.clear();
  }
  waiting_.push_back(owned.get());
  ++queue_version_;
  waiting_tokens_ += n;
  if (owned->group != 0) groups_[owned->group].push_back(owned.get());
  requests_.emplace(owned->id, std::move(owned));
  return {};
}

auto batch_scheduler::stops_at(const request& r, token_id t) const -> bool {
  const auto& p = r.sampling;
  const bool is_stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t) != p.stop_token_ids.end();
  return is_stop_id || (!p.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), t) != eos_ids_.end());
}

auto batch_scheduler::find_mut(request_id id) -> request* {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

auto batch_scheduler::find(request_id id) const -> const request* {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

auto batch_scheduler::view_of(const request& r) const -> policy::request_view {
  policy::request_view v;
  v.id = r.id;
  v.tenant = r.account != 0 ? r.account : r.tenant;
  v.weight = r.weight;
  v.priority = r.priority;
  v.arrival_s = r.arrival_s;
  v.num_prompt_tokens = static_cast<std::int32_t>(r.prompt.size());
  v.num_output_tokens = static_cast<std::int32_t>(r.output.size());
  v.max_tokens = r.sampling.max_tokens;
  v.output_len_hint = r.output_len_hint;
  v.num_computed_tokens = r.num_computed_tokens;
  return v;
}

void batch_scheduler::end(request& r, request_state state) {
  kv_.end(r.id);
  return_host_blocks(r);
  if (r.state == request_state::running) {
    running_.erase(std::find(running_.begin(), running_.end(), &r));
  } else if (r.state == request_state::waiting || r.state == request_state::preempted) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &r));
    waiting_tokens_ -= r.num_tokens();
  }
  r.state = state;
  if (r.known_to_executor) finished_.push_back(r.id);
  if (r.group != 0) {
    auto& members = groups_.at(r.group);
    members.erase(std::find(members.begin(), members.end(), &r));
    if (members.empty()) groups_.erase(r.group);
  }
  // One in the step under way is kept until update() is done with it;
  // any other goes now.
  auto node = requests_.extract(r.id);
  if (r.scheduled_in_step == out_step_ && !step_requests_.empty()) ended_.push_back(std::move(node.mapped()));
}

auto batch_scheduler::abort(request_id id) -> bool {
  request* r = find_mut(id);
  if (r == nullptr) return false;
  end(*r, request_state::aborted);
  return true;
}

// A swapped request's host blocks go back to the pool (it ends, or its KV
// was copied back in).
void batch_scheduler::return_host_blocks(request& r) {
  if (r.host_blocks.empty()) return;
  host_.release(r.host_blocks);
  r.host_blocks.clear();
  --num_swapped_;
}

// Drops every block the request holds; it starts again from nothing (or
// from what the prefix cache still has).
void batch_scheduler::drop_kv(request& r) {
  kv_.end(r.id);
  r.kv = nullptr;
  r.num_computed_tokens = r.num_cached_tokens = 0;
}

// Releases the prefix hits that waiting requests (but `keep`) hold, newest
// first, until one was released; false when none held any. They match again
// at admission (where the cache still has the blocks).
auto batch_scheduler::reclaim_waiting(const request* keep) -> bool {
  for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it) {
    request& w = **it;
    // (admit() drops the requests it admitted from waiting_ only at its end.)
    if (&w == keep || w.state == request_state::running || w.kv == nullptr || !w.host_blocks.empty()) continue;
    drop_kv(w);
    return true;
  }
  return false;
}

// Back to the head of the queue. By swap, while host blocks last, its KV is
// copied out (this step, before anything overwrites the blocks it frees)
// and readmission copies it back; else readmission recomputes prompt ++
// output (the prefix cache may still hold much of it).
void batch_scheduler::preempt(request& r, scheduler_output& out) {
  running_.erase(std::find(running_.begin(), running_.end(), &r));
  // The blocks still held (not those the sliding window dropped).
  const auto dropped = static_cast<std::size_t>(r.kv->num_dropped);
  const std::int64_t n = blocks_for(r.num_computed_tokens, kv_.options().block_size) - r.kv->num_dropped;
  std::optional<std::vector<block_id>> host;
  if (limits_.preemption == preemption_mode::swap && n > 0) host = host_.allocate(n);
  if (host) {
    const auto& device = r.kv->blocks;
    for (std::size_t i = 0; i < host->size(); ++i) out.swap_out.push_back({device[dropped + i], (*host)[i]});
    kv_.drop_blocks(*r.kv);
    r.host_blocks = std::move(*host);
    ++num_swap_outs_;
    ++num_swapped_;
  } else {
    drop_kv(r);
  }
  r.num_blocks_sent = 0; // the next admission sends a fresh table
  r.state = request_state::preempted;
  ++num_preemptions_;
  waiting_.insert(waiting_.begin(), &r);
  ++queue_version_;
  waiting_tokens_ += r.num_tokens();
}

auto batch_scheduler::fork_or_wait(request& r) -> bool {
  const auto bs = kv_.options().block_size;
  // The blocks before the one holding the prompt's last token: whole, and
  // never written again by whoever computed them.
  const auto k = static_cast<std::int32_t>((r.prompt.size() - 1) / static_cast<std::size_t>(bs));
  if (k == 0) return true;
  bool wait = false;
  for (const request* m : groups_.at(r.group)) {
    if (m == &r) continue;
    const auto* e = m->kv;
    if (e != nullptr && e->num_dropped == 0 && static_cast<std::int32_t>(e->blocks.size()) >= k &&
        m->num_computed_tokens >= k * bs) {
      r.num_cached_tokens = kv_.fork(*e, r.id, r.priority, r.prompt, k);
      r.kv = kv_.entry_of(r.id);
      r.num_computed_tokens = r.num_cached_tokens;
      ++num_forks_;
      num_forked_tokens_ += r.num_cached_tokens;
      return true;
    }
    // A lower choice at work on the prompt, or about to be: its blocks will do.
    if (m->choice < r.choice && m->state != request_state::preempted && m->num_computed_tokens < k * bs) wait = true;
  }
  return !wait;
}

void batch_scheduler::add_chunk(request& r, std::int32_t num_new, scheduler_output& out) {
  auto& c = out.scheduled.emplace_back();
  c.id = r.id;
  c.num_computed_tokens = r.num_computed_tokens;
  c.first_token = static_cast<std::int32_t>(out.token_ids.size());
  c.num_tokens = num_new;
  // The chunk's tokens: the rest of the prompt, then output (a prefill
  // after preemption recomputes both). A decode's one token is appended alone.
  const auto from = static_cast<std::size_t>(r.num_computed_tokens), to = from + static_cast<std::size_t>(num_new);
  const auto p = r.prompt.size();
  if (num_new == 1) {
    out.token_ids.push_back(from < p ? r.prompt[from] : r.output[from - p]);
  } else {
    if (from < p) out.token_ids.insert(out.token_ids.end(), r.prompt.begin() + static_cast<std::ptrdiff_t>(from),
                                       r.prompt.begin() + static_cast<std::ptrdiff_t>(std::min(to, p)));
    if (to > p) out.token_ids.insert(out.token_ids.end(), r.output.begin() + static_cast<std::ptrdiff_t>(std::max(from, p) - p),
                                     r.output.begin() + static_cast<std::ptrdiff_t>(to - p));
  }
  const auto& blocks = r.kv->blocks;
  c.reset_blocks = r.num_blocks_sent == 0;
  c.first_block = static_cast<std::int32_t>(out.block_ids.size());
  c.num_new_blocks = static_cast<std::int32_t>(blocks.size()) - r.num_blocks_sent;
  if (c.num_new_blocks > 0) out.block_ids.insert(out.block_ids.end(), blocks.begin() + r.num_blocks_sent, blocks.end());
  r.num_blocks_sent = static_cast<std::int32_t>(blocks.size());
  c.sample = r.num_computed_tokens + num_new == r.num_tokens();
  r.scheduled_in_step = out_step_;
  step_requests_.push_back(&r);
}

auto batch_scheduler::chunk_of(const request& r, std::int64_t budget) const -> std::int32_t {
  auto n = std::min<std::int64_t>(r.num_tokens() - r.num_computed_tokens, budget);
  if (limits_.long_prefill_token_threshold > 0) n = std::min<std::int64_t>(n, limits_.long_prefill_token_threshold);
  return static_cast<std::int32_t>(n);
}

auto batch_scheduler::admission_order(double now_s) -> std::vector<std::size_t> {
  std::vector<policy::request_view> waiting, running;
  waiting.reserve(waiting_.size());
  for (const request* r : waiting_) waiting.push_back(view_of(*r));
  running.reserve(running_.size());
  for (const request* r : running_) running.push_back(view_of(*r));
  return policy_.admission_order({now_s, waiting, running});
}

void batch_scheduler::begin_kv(request& r) {
  if (r.output.empty()) {
    // Prompt logprobs need every position computed: no cache hits (an
    // empty prompt matches nothing; its blocks are published as usual).
    const bool scored = r.sampling.prompt_logprobs >= 0;
    r.num_cached_tokens = kv_.begin(r.id, r.tenant, r.priority, scored ? std::span<const token_id>{} : r.prompt);
  } else { // readmitted after preemption: its output is prompt now
    std::vector<token_id> all = r.prompt;
    all.insert(all.end(), r.output.begin(), r.output.end());
    r.num_cached_tokens = kv_.begin(r.id, r.tenant, r.priority, all);
  }
  r.kv = kv_.entry_of(r.id);
  r.num_computed_tokens = r.num_cached_tokens;
}

auto batch_scheduler::grow_for_admission(request& r, std::int32_t num_new) -> bool {
  // The watermark holds back blocks for running requests to grow into;
  // with nothing running it would only block the queue for good.
  // Releasing waiting requests' prefix hits helps where released blocks
  // come back here (a cache), or when nothing runs (a lease: the manager
  // gets them back, and nothing else would ever free blocks).
  const bool reclaim = kv_.source().releases_locally() || running_.empty();
  bool grown = kv_.grow(*r.kv, r.num_computed_tokens + num_new, !running_.empty());
  if (!grown && reclaim && reclaim_waiting(&r))
    grown = kv_.grow(*r.kv, r.num_computed_tokens + num_new, !running_.empty());
  // A lease with nothing running: every waiting request's hits go back at once (one a step
  // kept a queue sharing a prefix pinning a full lease, and no step came to release more).
  if (!grown && !kv_.source().releases_locally() && running_.empty()) while (reclaim_waiting(&r)) continue;
  if (grown) return true;
  const bool swapped = !r.host_blocks.empty();
  // A waiting request holds no blocks while it cannot run, where that
  // helps: its prefix hits go too (grow took nothing else) and are
  // looked up again at admission. (A swapped one holds none.)
  if (reclaim && !swapped) drop_kv(r);
  blocked_available_ = kv_.source().num_available();
  blocked_version_ = queue_version_;
  return false;
}

void batch_scheduler::start_running(request& r, std::int32_t num_new, std::int64_t& budget, scheduler_output& out) {
  waiting_tokens_ -= r.num_tokens();
  r.state = request_state::running;
  running_.push_back(&r);
  if (!r.known_to_executor) {
    // The executor's sampler learns the request's real length limit (a
    // grammar ends its output within it).
    out.new_requests.push_back({r.id, r.prompt, r.sampling});
    out.new_requests.back().sampling.max_tokens = r.output_limit;
    r.known_to_executor = true;
  }
  add_chunk(r, num_new, out);
  budget -= num_new;
  step_prefill_tokens_ += num_new;
  step_admitted_tokens_ += num_new;
}

void batch_scheduler::admit(double now_s, std::int64_t& budget, scheduler_output& out) {
  if (waiting_.empty() || budget <= 0 || num_running() >= limits_.max_num_seqs) return;
  if (blocked_available_ >= 0 && kv_.source().num_available() <= blocked_available_ &&
      queue_version_ == blocked_version_)
    return; // nothing changed since the head did not fit
  blocked_available_ = -1;
  const auto order = admission_order(now_s);
  std::vector<bool> admitted(waiting_.size(), false);
  std::int32_t partial = 0; // running requests still in their prefill
  if (limits_.max_num_partial_prefills > 0)
    for (const request* r : running_)
      if (r->num_computed_tokens < static_cast<std::int32_t>(r->prompt.size())) ++partial;
  for (const std::size_t idx : order) {
    if (budget <= 0 || num_running() >= limits_.max_num_seqs) break;
    TROUPE_CHECK(idx < waiting_.size() && !admitted[idx], "the policy named a request twice or out of range");
    request& r = *waiting_[idx];
    // One of n choices: the prompt's KV of another, once computed.
    if (r.kv == nullptr && r.group != 0 && r.output.empty() && r.sampling.prompt_logprobs < 0 && !fork_or_wait(r))
      continue;
    // One more partial prefill than allowed (its prompt, cache hits not
    // counted, does not fit in this step): the next in order may fit.
    const bool spans_steps = r.num_tokens() - r.num_computed_tokens > chunk_of(r, budget);
    if (limits_.max_num_partial_prefills > 0 && spans_steps && partial >= limits_.max_num_partial_prefills) continue;
    if (r.kv == nullptr) begin_kv(r);
    const auto num_new = chunk_of(r, budget);
    if (!grow_for_admission(r, num_new)) break; // in the policy's order: nobody overtakes the head
    if (!r.host_blocks.empty()) { // its KV comes back into the first of its fresh blocks
      const auto& device = r.kv->blocks;
      const auto dropped = static_cast<std::size_t>(r.kv->num_dropped);
      for (std::size_t i = 0; i < r.host_blocks.size(); ++i)
        out.swap_in.push_back({r.host_blocks[i], device[dropped + i]});
      return_host_blocks(r);
    }
    admitted[idx] = true;
    start_running(r, num_new, budget, out);
    if (r.num_computed_tokens + num_new < r.num_tokens()) ++partial;
  }
  std::size_t keep = 0;
  for (std::size_t i = 0; i < waiting_.size(); ++i)
    if (!admitted[i]) waiting_[keep++] = waiting_[i];
  waiting_.resize(keep);
}

auto batch_scheduler::schedule(double now_s) -> scheduler_output {
  scheduler_output out;
  // Room for a token per running request and a prefill chunk's worth: the
  // whole budget would be a large allocation on every step.
  out.token_ids.reserve(std::min<std::size_t>(static_cast<std::size_t>(limits_.max_num_batched_tokens),
                                              running_.size() + 512));
  out.scheduled.reserve(running_.size() + 8);
  schedule(now_s, out);
  return out;
}

void batch_scheduler::schedule(double now_s, scheduler_output& out) {
  out.clear();
  out.finished.swap(finished_);
  ended_.clear(); // (already, unless the last step's update() was skipped)
  step_requests_.clear();
  ++out_step_;
  std::int64_t budget = limits_.max_num_batched_tokens;
  bool preempted = false;
  step_decode_tokens_ = step_prefill_tokens_ = step_admitted_tokens_ = 0;
  // Decodes first, then prefill chunks (stall-free batching).
  schedule_running(now_s, true, budget, budget, false, out, preempted);
  // Running prefills beside decodes or waiting requests: paced (what the
  // pacer allows, none in a step that measures the decodes alone), and
  // leaving waiting requests half of it; alone, about solo_step_s of them.
  const bool paced = pacer_.enabled() && (step_decode_tokens_ > 0 || !waiting_.empty());
  const bool probe = paced && step_decode_tokens_ > 0 && pacer_.probe();
  const std::int64_t allowance = !paced ? std::min<std::int64_t>(budget, pacer_.solo_allowance())
                                 : probe ? 0
                                         : std::min<std::int64_t>(budget, pacer_.allowance());
  schedule_running(now_s, false, budget, allowance, paced && !waiting_.empty(), out, preempted);
  // No admissions in a step that had to preempt: the pool is short. (So no
  // step swaps both ways, and host blocks freed by a swap-in are not
  // written by a swap-out before they are read.) Nor in a probe.
  if (!preempted && !probe) admit(now_s, budget, out);
  // Nothing else could run (the waiting do not fit): the prefill runs
  // rather than the step be empty.
  if (paced && !preempted && out.scheduled.empty()) schedule_running(now_s, false, budget, budget, false, out, preempted);
}

void batch_scheduler::schedule_running(double now_s, bool decodes, std::int64_t& budget, std::int64_t cap, bool share,
                                       scheduler_output& out, bool& preempted) {
  // A request that cannot grow makes the policy preempt someone not yet
  // scheduled this step (possibly itself); the scan then starts over,
  // skipping the scheduled.
  for (std::size_t i = 0; i < running_.size() && std::min(budget, cap) > 0;) {
    request& r = *running_[i];
    const bool is_decode = r.num_computed_tokens >= static_cast<std::int32_t>(r.prompt.size());
    if (is_decode != decodes || r.scheduled_in_step == out_step_) {
      ++i;
      continue;
    }
    const auto room = std::min(budget, cap);
    const auto num_new = chunk_of(r, share ? std::min(room, std::max<std::int64_t>(budget / 2, 1)) : room);
    if (!kv_.grow(*r.kv, r.num_computed_tokens + num_new, false)) {
      // Prefix hits held by waiting requests go before running work does
      // (where released blocks come back here).
      if (kv_.source().releases_locally() && reclaim_waiting(nullptr)) continue;
      std::vector<std::size_t> candidates;
      std::vector<policy::request_view> views;
      for (std::size_t j = 0; j < running_.size(); ++j)
        if (running_[j]->scheduled_in_step != out_step_) {
          candidates.push_back(j);
          views.push_back(view_of(*running_[j]));
        }
      const std::size_t v = policy_.preemption_victim({now_s, {}, views});
      TROUPE_CHECK(v < candidates.size(), "the policy chose no victim");
      preempt(*running_[candidates[v]], out);
      preempted = true;
      i = 0;
      continue;
    }
    add_chunk(r, num_new, out);
    budget -= num_new;
    cap -= num_new;
    (decodes ? step_decode_tokens_ : step_prefill_tokens_) += num_new;
    ++i;
  }
}

void batch_scheduler::cache_figures(const request& r, request_update& u) const {
  // Every full block of the prompt is published to the prefix cache (when it
  // is on); those past the cached ones are what this request wrote there.
  const auto& o = kv_.options();
  const auto prompt = static_cast<std::int32_t>(r.prompt.size());
  u.num_cached_tokens = r.num_cached_tokens;
  u.num_cache_written_tokens =
      o.enable_prefix_caching ? std::max(0, prompt / o.block_size * o.block_size - r.num_cached_tokens) : 0;
}

auto batch_scheduler::update(const scheduler_output& step, const step_result& result)
    -> std::vector<request_update> {
  std::vector<request_update> updates;
  updates.reserve(result.sampled.size());
  update(step, result, updates);
  return updates;
}

void batch_scheduler::update(const scheduler_output& step, const step_result& result,
                             std::vector<request_update>& updates) {
  updates.clear();
  // The chunks' requests as schedule() recorded them (those ended meanwhile
  // are kept alive until this update() returns), else looked up by id.
  const bool recorded = step_requests_.size() == step.scheduled.size();
  // The requests of the chunks that sampled, in order: the results come in
  // that order, so each request is looked up once.
  auto& sampling = sampling_scratch_;
  sampling.clear();
  for (std::size_t i = 0; i < step.scheduled.size(); ++i) {
    const auto& c = step.scheduled[i];
    request* r = recorded && step_requests_[i]->id == c.id ? step_requests_[i] : find_mut(c.id);
    if (c.sample) sampling.push_back(r);
    if (r == nullptr || r->state != request_state::running) continue; // aborted or preempted meanwhile
    const bool decode = c.num_computed_tokens >= static_cast<std::int32_t>(r->prompt.size());
    const auto n = c.num_tokens;
    r->num_computed_tokens += n;
    if (reports_service_) policy_.on_served(view_of(*r), decode ? 0 : n, decode ? n : 0);
    // Only once a block is full is there anything to publish.
    if (kv_.has_commit(*r->kv, r->num_computed_tokens)) kv_.commit(*r->kv, r->prompt, r->output, r->num_computed_tokens);
    kv_.slide(*r->kv, r->num_computed_tokens); // blocks out of every later token's window go
  }
  for (std::size_t k = 0; k < result.sampled.size(); ++k) {
    const auto& s = result.sampled[k];
    request* r = k < sampling.size() && sampling[k] != nullptr && sampling[k]->id == s.id ? sampling[k] : find_mut(s.id);
    if (r == nullptr || r->state != request_state::running) continue;
    request_update u{r->id, s.result, finish_reason::none, s.prompt_logprobs};
    if (r->output.empty()) cache_figures(*r, u);
    // The sampled token, then those a grammar forces after it (jump-forward),
    // up to the first that ends the request; the update keeps those appended.
    auto& forced = u.token->forced;
    std::size_t kept = 0;
    for (token_id t = s.result.token;;) {
      r->output.push_back(t);
      // A token that fills a block: its KV comes next step, then the block is published.
      kv_.prepare_commit(*r->kv, r->prompt, r->output);
      if (r->may_stop && stops_at(*r, t))
        u.finished = finish_reason::stop;
      else if (static_cast<std::int32_t>(r->output.size()) >= r->output_limit)
        u.finished = finish_reason::length;
      if (u.finished != finish_reason::none || kept == forced.size()) break;
      t = forced[kept++];
    }
    forced.resize(kept);
    num_jump_forward_tokens_ += static_cast<std::int64_t>(kept);
    if (u.finished != finish_reason::none) end(*r, request_state::finished);
    updates.push_back(std::move(u));
  }
  step_requests_.clear(); // the step is done: its ended requests can go
  ended_.clear();
}

auto batch_scheduler::prefill_tokens() const -> std::int64_t {
  std::int64_t n = waiting_tokens_;
  for (const request* r : running_)
    n += std::max<std::int64_t>(0, static_cast<std::int64_t>(r->prompt.size()) - r->num_computed_tokens);
  return n;
}

auto batch_scheduler::decode_tokens() const -> std::int64_t {
  std::int64_t n = 0;
  for (const request* r : running_) n += std::max<std::int64_t>(0, r->output_limit - static_cast<std::int64_t>(r->output.size()));
  return n;
}

auto batch_scheduler::oldest_waiting_arrival() const -> double {
  double t = std::numeric_limits<double>::infinity();
  for (const request* r : waiting_) t = std::min(t, r->arrival_s);
  return t;
}

void batch_scheduler::check_invariants() const {
  TROUPE_CHECK(num_running() <= limits_.max_num_seqs, "more running requests than max_num_seqs");
  std::int64_t tokens = 0;
  for (const request* r : waiting_) {
    TROUPE_CHECK(r->state == request_state::waiting || r->state == request_state::preempted, "a queued request is not waiting");
    TROUPE_CHECK(std::count(running_.begin(), running_.end(), r) == 0, "a request is both waiting and running");
    tokens += r->num_tokens();
  }
  TROUPE_CHECK(tokens == waiting_tokens_, "the waiting token count drifted");
  for (const request* r : running_) TROUPE_CHECK(r->state == request_state::running, "a running request is not running");
  TROUPE_CHECK(waiting_.size() + running_.size() == requests_.size(), "a request is in no queue");
  std::int64_t host_blocks = 0, swapped = 0;
  for (const auto& [id, r] : requests_) {
    TROUPE_CHECK(r->kv == kv_.entry_of(id), "a request's KV entry is stale");
    if (r->kv != nullptr) {
      for (std::size_t i = 0; i < r->kv->blocks.size(); ++i)
        TROUPE_CHECK((i < static_cast<std::size_t>(r->kv->num_dropped)) == (r->kv->blocks[i] == kv_entry::no_block),
                     "a request's dropped blocks are not exactly its window's leading ones");
      const auto w = kv_.options().sliding_window_tokens;
      TROUPE_CHECK(w > 0 || r->kv->num_dropped == 0, "a block dropped without a sliding window");
      TROUPE_CHECK(static_cast<std::int64_t>(r->kv->num_dropped) * kv_.options().block_size <=
                       std::max<std::int64_t>(0, r->num_computed_tokens - w + 1),
                   "a block dropped that a later token attends to");
    }
    if (r->host_blocks.empty()) continue;
    TROUPE_CHECK(r->state == request_state::preempted, "a request holds host blocks but is not preempted");
    TROUPE_CHECK(r->kv->live_blocks().empty(), "a swapped request holds device blocks");
    TROUPE_CHECK(static_cast<std::int64_t>(r->host_blocks.size()) ==
                     blocks_for(r->num_computed_tokens, kv_.options().block_size) - r->kv->num_dropped,
                 "a swapped request's host blocks do not cover its computed tokens");
    host_blocks += static_cast<std::int64_t>(r->host_blocks.size());
    ++swapped;
  }
  TROUPE_CHECK(host_blocks + host_.num_free() == host_.capacity(), "host blocks are not conserved");
  // Every block's references at the source are the tables that list it:
  // a fork's shared blocks are counted once per holder, and released so.
  std::unordered_map<block_id, std::int32_t> holders;
  for (const auto& [id, r] : requests_)
    if (r->kv != nullptr)
      for (const block_id b : r->kv->live_blocks()) ++holders[b];
  for (const auto& [b, n] : holders)
    TROUPE_CHECK(kv_.source().references(b) == n, "a block's references differ from the tables that list it");
  std::int64_t grouped = 0;
  for (const auto& [g, members] : groups_) {
    TROUPE_CHECK(!members.empty(), "an empty fork group");
    for (const request* m : members) TROUPE_CHECK(m->group == g && find(m->id) == m, "a fork group lists a stranger");
    grouped += static_cast<std::int64_t>(members.size());
  }
  TROUPE_CHECK(grouped == std::count_if(requests_.begin(), requests_.end(), [](const auto& kv) { return kv.second->group != 0; }),
               "a grouped request is in no group");
  TROUPE_CHECK(swapped == num_swapped_, "the swapped count drifted");
  kv_.source().check_invariants();
}

void batch_scheduler::observe_step(double seconds) {
  bool pending = !waiting_.empty();
  for (const request* r : running_) pending = pending || r->num_computed_tokens < static_cast<std::int32_t>(r->prompt.size());
  pacer_.observe(step_decode_tokens_, step_prefill_tokens_, seconds, pending, step_admitted_tokens_);
}

} // namespace troupe
