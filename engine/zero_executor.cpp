#include "engine/zero_executor.hpp"

#include "base/check.hpp"

#include <algorithm>
#include <thread>

namespace troupe {

zero_executor::zero_executor(zero_executor_options options) : options_(std::move(options)) {
  TROUPE_CHECK(options_.num_sampled_ids >= 0 && options_.num_sampled_ids <= options_.vocab_size,
               "sampled ids past the model's vocabulary");
  const auto num_sampled = options_.num_sampled_ids > 0 ? options_.num_sampled_ids : options_.vocab_size;
  for (token_id t = 0; t < num_sampled; ++t)
    if (std::find(options_.avoid.begin(), options_.avoid.end(), t) == options_.avoid.end())
      tokens_.push_back(t);
  TROUPE_CHECK(!tokens_.empty(), "zero executor has no token to return");
}

auto zero_executor::execute(const scheduler_output& step) -> step_result {
  if (options_.step_time.count() > 0) std::this_thread::sleep_for(options_.step_time);
  step_result out;
  out.sampled.reserve(step.scheduled.size());
  for (const auto& r : step.new_requests) {
    if (r.sampling.prompt_logprobs >= 0) scoring_[r.id] = r.prompt_tokens;
    if (auto g = grammar::compile_grammar(r.sampling.grammar, options_.grammars))
      constrained_.insert_or_assign(r.id, constrained{grammar::grammar_matcher(std::move(g)), r.sampling.max_tokens});
  }
  const auto n = static_cast<std::uint64_t>(tokens_.size());
  for (const auto& c : step.scheduled) {
    if (!c.sample) continue;
    const auto position = static_cast<std::uint64_t>(c.num_computed_tokens + c.num_tokens);
    const auto first = (c.id * 7919 + position * 104729) % n;
    token_id t = tokens_[first];
    if (auto it = constrained_.find(c.id); it != constrained_.end()) {
      auto& [matcher, left] = it->second;
      t = -1;
      matcher.prepare(left);
      // Where the grammar may end, it ends (the shortest answer); else the
      // first token from here on that the grammar allows.
      for (const auto e : matcher.grammar().vocabulary().end_ids())
        if (t < 0 && matcher.allowed(e)) t = e;
      for (std::uint64_t k = 0; k < n && t < 0; ++k)
        if (matcher.allowed(tokens_[(first + k) % n])) t = tokens_[(first + k) % n];
      if (t < 0) t = tokens_[first]; // nothing allowed at all: cannot happen (fill_mask allows an end)
      matcher.accept(t);
      --left;
    }
    sampled_token s{c.id, {t, 0.0f, {}, {}}, {}};
    if (const auto it = scoring_.find(c.id); it != scoring_.end()) {
      for (std::size_t i = 1; i < it->second.size(); ++i) s.prompt_logprobs.push_back({it->second[i], 0.0f, {}, {}});
      scoring_.erase(it);
    }
    out.sampled.push_back(std::move(s));
  }
  for (const auto id : step.finished) {
    scoring_.erase(id);
    constrained_.erase(id);
  }
  return out;
}

} // namespace troupe
