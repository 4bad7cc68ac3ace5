#include "engine/generator.hpp"

#include "engine/core/block_source.hpp"

#include <chrono>
#include <numeric>
#include <stdexcept>
#include <string>

namespace troupe {

generator::generator(executor& ex, const tokenizer& tok, std::vector<token_id> eos_ids,
                     std::int32_t max_chunk_tokens, std::int64_t max_model_len)
  : ex_(ex), tok_(tok), eos_ids_(std::move(eos_ids)),
    max_chunk_tokens_(max_chunk_tokens), max_model_len_(max_model_len) {
  if (max_chunk_tokens < 1) throw std::invalid_argument("max_chunk_tokens must be at least 1");
}

auto generator::check(std::span<const token_id> prompt, const sampling_params& params) const
    -> std::int64_t {
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty");
  for (const auto id : prompt)
    if (id < 0 || id >= ex_.vocab_size())
      throw std::invalid_argument("prompt token " + std::to_string(id) + " is outside the model's vocabulary of " +
                                  std::to_string(ex_.vocab_size()));
  if (auto err = params.validate(); !err.empty()) throw std::invalid_argument(err);
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());
  const std::int64_t total = n_prompt + params.max_tokens;
  if (total > max_model_len_)
    throw std::invalid_argument("prompt (" + std::to_string(n_prompt) + " tokens) + max_tokens (" +
                                std::to_string(params.max_tokens) + ") exceeds the model's " +
                                std::to_string(max_model_len_) + "-token context");
  const std::int64_t bs = ex_.block_size();
  const std::int64_t blocks = blocks_for(total, bs);
  if (blocks > ex_.num_kv_blocks())
    throw std::invalid_argument("prompt + max_tokens needs " + std::to_string(blocks) +
                                " KV blocks, the cache has " + std::to_string(ex_.num_kv_blocks()));
  return blocks;
}

auto generator::generate(std::span<const token_id> prompt, const sampling_params& params,
                         const std::function<void(std::string_view)>& on_text)
    -> generation_stats {
  const std::int64_t blocks = check(prompt, params);
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());

  // One request alone: it may use blocks 0..blocks-1.
  std::vector<block_id> table(static_cast<std::size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  const request_id id = next_id_++;
  output_processor out(tok_, params, eos_ids_, false);
  generation_stats stats;
  stats.num_prompt_tokens = n_prompt;

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto t_first = t0;
  scheduler_output step;
  step.new_requests.push_back({id, {prompt.begin(), prompt.end()}, params});
  // The request's one chunk, updated in place each step.
  auto& c = step.add_chunk(id, {}, 0, table, true); // the same whole table every step
  std::int64_t done = 0;
  token_id next = -1;
  while (stats.reason == finish_reason::none) {
    c.num_computed_tokens = static_cast<std::int32_t>(done);
    if (done < n_prompt) {
      const auto n = std::min<std::int64_t>(max_chunk_tokens_, n_prompt - done);
      step.token_ids.assign(prompt.begin() + done, prompt.begin() + done + n);
      c.sample = done + n == n_prompt;
    } else {
      step.token_ids.assign(1, next);
      c.sample = true;
    }
    c.num_tokens = static_cast<std::int32_t>(step.token_ids.size());
    done += c.num_tokens;
    const auto result = ex_.execute(step);
    step.new_requests.clear();
    if (result.sampled.empty()) continue;

    next = result.sampled.front().result.token;
    stats.tokens.push_back(next);
    if (stats.tokens.size() == 1) t_first = clock::now();
    auto delta = out.on_token(next);
    if (!delta.text.empty()) on_text(delta.text);
    stats.reason = delta.finished;
  }
  scheduler_output done_step;
  done_step.finished = {id};
  ex_.execute(done_step);
  const auto t_end = clock::now();
  stats.num_generated_tokens = static_cast<std::int64_t>(stats.tokens.size());
  stats.prefill_seconds = std::chrono::duration<double>(t_first - t0).count();
  stats.decode_seconds = std::chrono::duration<double>(t_end - t_first).count();
  return stats;
}

} // namespace troupe
