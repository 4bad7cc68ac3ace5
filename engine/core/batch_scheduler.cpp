#include "engine/core/batch_scheduler.hpp"

#include "engine/check.hpp"

#include <algorithm>
#include <string>

namespace troupe {

batch_scheduler::batch_scheduler(const scheduler_limits& limits, block_pool blocks,
                                 std::vector<token_id> eos_ids)
  : limits_(limits), blocks_(std::move(blocks)), eos_ids_(std::move(eos_ids)) {
  TROUPE_CHECK(limits.max_num_seqs >= 1 && limits.max_num_batched_tokens >= 1 &&
                   limits.block_size >= 1 && limits.max_model_len >= 1,
               "scheduler limits must be positive");
}

auto batch_scheduler::check(const request& r) const -> std::string {
  if (r.prompt.empty()) return "the prompt is empty";
  const std::int64_t total = static_cast<std::int64_t>(r.prompt.size()) + r.sampling.max_tokens;
  if (total > limits_.max_model_len)
    return "prompt (" + std::to_string(r.prompt.size()) + " tokens) + max_tokens (" +
           std::to_string(r.sampling.max_tokens) + ") exceeds the model's context of " +
           std::to_string(limits_.max_model_len) + " tokens";
  // The last sampled token is never computed, so total - 1 positions hold KV.
  const std::int64_t needed = blocks_for(total - 1, limits_.block_size);
  if (needed > blocks_.num_total())
    return "prompt + max_tokens needs " + std::to_string(needed) + " KV blocks, the cache holds " +
           std::to_string(blocks_.num_total());
  return {};
}

void batch_scheduler::add(request r) {
  TROUPE_CHECK(check(r).empty(), "request added without passing check()");
  TROUPE_CHECK(!requests_.contains(r.id), "request id reused");
  auto owned = std::make_unique<request>(std::move(r));
  owned->state = request_state::waiting;
  waiting_.push_back(owned.get());
  requests_.emplace(owned->id, std::move(owned));
}

auto batch_scheduler::find(request_id id) -> request* {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

void batch_scheduler::release(request& r) {
  blocks_.give_back(r.blocks);
  r.blocks.clear();
  r.num_computed_tokens = 0;
}

auto batch_scheduler::abort(request_id id) -> bool {
  request* r = find(id);
  if (r == nullptr) return false;
  if (r->state == request_state::waiting)
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r));
  else
    running_.erase(std::find(running_.begin(), running_.end(), r));
  release(*r);
  if (r->known_to_executor) finished_.push_back(id);
  requests_.erase(id);
  return true;
}

// Extends r's block table to hold num_tokens positions; false, with nothing
// taken, when the pool is short.
auto batch_scheduler::grow(request& r, std::int32_t num_tokens) -> bool {
  const std::int64_t have = static_cast<std::int64_t>(r.blocks.size());
  const std::int64_t need = blocks_for(num_tokens, limits_.block_size) - have;
  if (need <= 0) return true;
  auto got = blocks_.take(need);
  if (!got) return false;
  r.blocks.insert(r.blocks.end(), got->begin(), got->end());
  return true;
}

// Back to the front of the queue, to recompute prompt ++ output when readmitted.
void batch_scheduler::preempt(request& r) {
  release(r);
  r.state = request_state::waiting;
  ++r.num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(&r);
}

auto batch_scheduler::chunk_of(request& r, std::int32_t num_new) -> scheduled_chunk {
  scheduled_chunk c;
  c.id = r.id;
  c.num_computed_tokens = r.num_computed_tokens;
  c.tokens.reserve(static_cast<std::size_t>(num_new));
  for (std::int32_t i = 0; i < num_new; ++i) c.tokens.push_back(r.token(r.num_computed_tokens + i));
  c.block_table = r.blocks;
  c.sample = r.num_computed_tokens + num_new == r.num_tokens();
  return c;
}

auto batch_scheduler::schedule() -> scheduler_output {
  scheduler_output out;
  out.finished = std::move(finished_);
  finished_.clear();
  std::int64_t budget = limits_.max_num_batched_tokens;
  bool preempted = false;

  // Running requests, oldest first; a request that cannot grow preempts the
  // newest running one (possibly itself).
  for (std::size_t i = 0; i < running_.size() && budget > 0;) {
    request& r = *running_[i];
    const auto num_new =
        static_cast<std::int32_t>(std::min<std::int64_t>(r.num_tokens() - r.num_computed_tokens, budget));
    if (!grow(r, r.num_computed_tokens + num_new)) {
      request* victim = running_.back();
      running_.pop_back();
      preempt(*victim);
      preempted = true;
      if (victim == &r) break;
      continue; // retry r with the freed blocks
    }
    out.scheduled.push_back(chunk_of(r, num_new));
    budget -= num_new;
    ++i;
  }

  // Admission, first come first served; none in a step that had to preempt.
  while (!preempted && !waiting_.empty() && budget > 0 &&
         static_cast<std::int32_t>(running_.size()) < limits_.max_num_seqs) {
    request& r = *waiting_.front();
    const auto num_new =
        static_cast<std::int32_t>(std::min<std::int64_t>(r.num_tokens() - r.num_computed_tokens, budget));
    if (!grow(r, r.num_computed_tokens + num_new)) break;
    waiting_.pop_front();
    r.state = request_state::running;
    running_.push_back(&r);
    if (!r.known_to_executor) {
      out.new_requests.push_back({r.id, r.prompt, r.sampling});
      r.known_to_executor = true;
    }
    out.scheduled.push_back(chunk_of(r, num_new));
    budget -= num_new;
  }
  return out;
}

auto batch_scheduler::update(const scheduler_output& step, const step_result& result)
    -> std::vector<request_update> {
  std::vector<request_update> updates;
  updates.reserve(result.sampled.size());
  for (const auto& c : step.scheduled)
    if (request* r = find(c.id); r != nullptr && r->state == request_state::running)
      r->num_computed_tokens += static_cast<std::int32_t>(c.tokens.size());

  for (const auto& s : result.sampled) {
    request* r = find(s.id);
    if (r == nullptr || r->state != request_state::running) continue; // aborted meanwhile
    const token_id t = s.result.token;
    r->output.push_back(t);
    request_update u{r->id, {s.result}, finish_reason::none};
    const auto& p = r->sampling;
    const bool is_stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t) != p.stop_token_ids.end();
    const bool is_eos = !p.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), t) != eos_ids_.end();
    if (is_stop_id || is_eos)
      u.finished = finish_reason::stop;
    else if (static_cast<std::int32_t>(r->output.size()) >= p.max_tokens ||
             r->num_tokens() >= limits_.max_model_len)
      u.finished = finish_reason::length;
    if (u.finished != finish_reason::none) {
      running_.erase(std::find(running_.begin(), running_.end(), r));
      release(*r);
      finished_.push_back(r->id);
      requests_.erase(r->id);
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

} // namespace troupe
