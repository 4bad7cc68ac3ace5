#include "engine/cpu/cpu_executor.hpp"

#include "base/check.hpp"
#include "engine/cpu/quant_gemm.hpp"
#include "engine/cpu/threads.hpp"

namespace troupe {

cpu_executor::cpu_executor(const model_weights& weights, const cpu_executor_options& options)
  : options_(options),
    model_(weights, options.block_size, options.num_kv_blocks, nullptr, options.kv_type),
    seed_source_(options.seed) {
  TROUPE_CHECK(options.num_host_blocks >= 0, "negative swap space");
  TROUPE_CHECK(options.num_sampled_ids >= 0 && options.num_sampled_ids <= model_.config().vocab_size,
               "sampled ids past the model's vocabulary");
  if (options_.num_sampled_ids == 0) options_.num_sampled_ids = model_.config().vocab_size;
  // Untouched until a block is swapped out: pages are mapped as they are written.
  if (options.num_host_blocks > 0)
    host_ = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(options.num_host_blocks) *
                                                        static_cast<std::size_t>(model_.kv_cache().block_bytes()));
  set_cpu_threads(options.num_threads);
  // The quantized kernels' instruction set (TROUPE_CPU_ISA may name one the
  // CPU lacks): chosen now, so a bad choice stops start-up, not a step.
  if (weights.first_quantized() != nullptr) (void)quant_isa();
}

void cpu_executor::swap(const scheduler_output& step) {
  auto& kv = model_.kv_cache();
  const auto bytes = kv.block_bytes();
  const auto host = [&](block_id h) {
    TROUPE_CHECK(h >= 0 && h < options_.num_host_blocks, "host block id out of range");
    return host_.get() + static_cast<std::int64_t>(h) * bytes;
  };
  for (const auto& c : step.swap_out) kv.save_block(c.from, host(c.to));
  for (const auto& c : step.swap_in) kv.load_block(c.to, host(c.from));
}

auto cpu_executor::execute(const scheduler_output& step) -> step_result {
  swap(step);
  for (const auto& r : step.new_requests) {
    samplers_.insert_or_assign(r.id, request_sampler(r.sampling, r.prompt_tokens, seed_source_.next(),
                                                     grammar::compile_grammar(r.sampling.grammar, options_.grammars),
                                                     options_.jump_forward));
    if (r.sampling.prompt_logprobs >= 0) scoring_.insert_or_assign(r.id, prompt_scores{r.prompt_tokens, {}});
  }

  tables_.apply(step);
  chunks_.clear();
  for (const auto& s : step.scheduled)
    chunks_.push_back({step.tokens_of(s), s.num_computed_tokens, tables_.table(s.id), scoring_.contains(s.id)});
  model_.forward(chunks_, false, logits_);

  // Samplers are independent: at batch 32 sampling serially would cost as
  // much as a tenth of the step.
  step_result out;
  const auto vocab = static_cast<std::size_t>(model_.config().vocab_size);
  const auto num_sampled = static_cast<std::size_t>(options_.num_sampled_ids);
  auto& todo = to_sample_;
  todo.clear();
  std::size_t row = 0; // the chunk's first logits row
  for (std::size_t i = 0; i < step.scheduled.size(); ++i) {
    const auto& s = step.scheduled[i];
    const std::size_t rows = chunks_[i].all_logits ? static_cast<std::size_t>(s.num_tokens) : 1;
    row += rows;
    if (!s.sample && !chunks_[i].all_logits) continue;
    auto it = samplers_.find(s.id);
    TROUPE_CHECK(it != samplers_.end(), "sampling a request the executor was never given");
    auto scored = chunks_[i].all_logits ? scoring_.find(s.id) : scoring_.end();
    if (scored != scoring_.end()) score_prompt(s, row - rows, scored->second, it->second);
    if (!s.sample) continue;
    todo.emplace_back(row - 1, &it->second);
    auto& t = out.sampled.emplace_back();
    t.id = s.id;
    if (scored != scoring_.end()) { // its first token: the prompt's scores go with it
      t.prompt_logprobs = std::move(scored->second.scores);
      scoring_.erase(scored);
    }
  }
  const auto n = static_cast<std::int64_t>(todo.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (std::int64_t j = 0; j < n; ++j) {
    const auto [r, sampler] = todo[static_cast<std::size_t>(j)];
    // Only the ids the tokenizer can spell: a padding row would stall the stream.
    out.sampled[static_cast<std::size_t>(j)].result = sampler->sample(std::span(logits_).subspan(r * vocab, num_sampled));
  }
  for (auto id : step.finished) {
    samplers_.erase(id);
    scoring_.erase(id);
  }
  tables_.forget_finished(step);
  return out;
}

void cpu_executor::score_prompt(const scheduled_chunk& c, std::size_t row, prompt_scores& p,
                                request_sampler& sampler) {
  const auto vocab = static_cast<std::size_t>(model_.config().vocab_size);
  const auto num_sampled = static_cast<std::size_t>(options_.num_sampled_ids);
  // Row k sees positions up to num_computed + k and predicts the token after.
  // Recomputed positions (after a preemption) were scored before.
  for (std::int32_t k = 0; k < c.num_tokens; ++k) {
    const auto next = static_cast<std::size_t>(c.num_computed_tokens + k) + 1;
    if (next != p.scores.size() + 1 || next >= p.prompt.size()) continue;
    p.scores.push_back(sampler.score(std::span(logits_).subspan((row + static_cast<std::size_t>(k)) * vocab, num_sampled),
                                     p.prompt[next]));
  }
}

} // namespace troupe
