#include "engine/grammar/grammar_matcher.hpp"

#include "base/check.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>

namespace troupe::grammar {

void grammar_matcher::mask(std::span<float> logits, std::int32_t tokens_left) {
  g_->fill_mask(state_, tokens_left, bits_);
  const auto n = std::min(logits.size(), bits_.size() * 64);
  constexpr float off = -std::numeric_limits<float>::infinity();
  for (std::size_t w = 0; w * 64 < n; ++w) {
    const auto word = bits_[w];
    if (word == ~std::uint64_t{0}) continue;
    const auto end = std::min(n, (w + 1) * 64);
    for (std::size_t i = w * 64; i < end; ++i)
      if (!((word >> (i % 64)) & 1)) logits[i] = off;
  }
  for (auto i = n; i < logits.size(); ++i) logits[i] = off;
}

void grammar_matcher::prepare(std::int32_t tokens_left) { g_->fill_mask(state_, tokens_left, bits_); }

auto grammar_matcher::allowed(token_id id) const -> bool {
  const auto i = static_cast<std::size_t>(id);
  return id >= 0 && i / 64 < bits_.size() && ((bits_[i / 64] >> (i % 64)) & 1);
}

void grammar_matcher::accept(token_id id) {
  const auto& v = g_->vocabulary();
  if (id < 0 || id >= v.size()) return;
  const auto bytes = v.surface(id);
  if (!bytes.empty()) state_ = g_->advance(state_, bytes);
}

void grammar_matcher::take_forced(std::int32_t max_tokens, std::vector<token_id>& out) {
  if (max_tokens <= 0) return;
  const auto& v = g_->vocabulary();
  // Enough bytes for max_tokens of the longest tokens, within reason.
  const auto limit = std::min<std::size_t>(static_cast<std::size_t>(max_tokens) * static_cast<std::size_t>(v.max_depth()), 4096);
  const std::string bytes = g_->forced_bytes(state_, limit);
  std::string_view rest = bytes;
  for (std::int32_t n = 0; n < max_tokens && !rest.empty(); ++n) {
    const auto [id, len] = v.longest_prefix(rest);
    if (id < 0) break;
    out.push_back(id);
    state_ = g_->advance(state_, rest.substr(0, len));
    rest.remove_prefix(len);
  }
}

auto grammar_cache::find(const std::string& gbnf) -> std::shared_ptr<compiled_grammar> {
  if (auto it = by_text_.find(gbnf); it != by_text_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  if (auto it = live_.find(gbnf); it != live_.end()) return it->second.lock();
  return nullptr;
}

auto grammar_cache::get(const std::string& gbnf) -> std::shared_ptr<compiled_grammar> {
  {
    std::lock_guard lock(mutex_);
    if (auto g = find(gbnf)) return g;
  }
  // Compiled without the lock (linear in the text); a second compile of the
  // same text meanwhile gives way to the first.
  auto g = std::make_shared<compiled_grammar>(parse_gbnf(gbnf), vocab_);
  std::lock_guard lock(mutex_);
  if (auto first = find(gbnf)) return first;
  lru_.emplace_front(gbnf, g);
  by_text_.emplace(gbnf, lru_.begin());
  if (lru_.size() > capacity_) {
    by_text_.erase(lru_.back().first);
    lru_.pop_back();
  }
  if (live_.size() >= 2 * capacity_) std::erase_if(live_, [](const auto& e) { return e.second.expired(); });
  live_.insert_or_assign(gbnf, g);
  return g;
}

auto prepare_grammar(grammar_cache& cache, const std::string& gbnf) -> std::shared_ptr<compiled_grammar> {
  auto g = cache.get(gbnf);
  std::vector<std::uint64_t> bits;
  g->fill_mask(g->start(), 0, bits);
  if (g->costly(g->start()))
    throw grammar_error("the grammar is too costly to run: a state of its automaton needs over " +
                        std::to_string(compiled_grammar::max_stacks) + " parse stacks, or a token mask over " +
                        std::to_string(compiled_grammar::max_walk_cost) +
                        " steps (a schema with fewer alternatives at one place, or fewer properties, fits)");
  return g;
}

auto compile_grammar(const std::string& gbnf, const std::shared_ptr<grammar_cache>& cache)
    -> std::shared_ptr<compiled_grammar> {
  if (gbnf.empty()) return nullptr;
  TROUPE_CHECK(cache != nullptr, "a request with a grammar on a backend without the tokenizer's vocabulary");
  try {
    return cache->get(gbnf);
  } catch (const grammar_error& e) {
    TROUPE_CHECK(false, e.what());
  }
  return nullptr;
}

} // namespace troupe::grammar
