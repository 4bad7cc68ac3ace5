#pragma once
// One request's place in its grammar, and the cache of compiled grammars
// that requests bringing the same grammar text share (with their masks).

#include "base/types.hpp"
#include "engine/grammar/compiled_grammar.hpp"

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe::grammar {

/// Not thread-safe (one per request); the compiled grammar it shares is.
class grammar_matcher {
public:
  explicit grammar_matcher(std::shared_ptr<compiled_grammar> g) : g_(std::move(g)), state_(g_->start()) {}

  /// Sets the logits of the tokens the grammar refuses next to -inf (ids past
  /// the vocabulary too). tokens_left: the tokens the request may still
  /// produce, this one included (compiled_grammar::fill_mask's budget).
  void mask(std::span<float> logits, std::int32_t tokens_left);
  /// Takes the mask for the next token (fill_mask's budget), for allowed().
  void prepare(std::int32_t tokens_left);
  /// Whether `id` is allowed next, by the mask prepare() took.
  auto allowed(token_id id) const -> bool;
  /// Moves past `id`'s bytes; an end id changes nothing.
  void accept(token_id id);
  /// Jump-forward: appends to `out` the tokens that write the bytes every
  /// continuation starts with (compiled_grammar::forced_bytes), each the
  /// longest token that fits, at most max_tokens of them, and accepts them.
  /// Stops early where no token writes the next forced byte.
  void take_forced(std::int32_t max_tokens, std::vector<token_id>& out);

  auto grammar() const -> compiled_grammar& { return *g_; }
  auto state() const -> std::int32_t { return state_; }

private:
  std::shared_ptr<compiled_grammar> g_;
  std::int32_t state_;
  std::vector<std::uint64_t> bits_;
};

/// Compiled grammars by their GBNF text, the least recently used dropped
/// past `capacity`; one a request still holds is found too, however old.
/// Thread-safe: the tokenizer pool compiles a request's grammar here before
/// it is submitted, and the executors of the same vocabulary (one cache per
/// model, shared) then find it, off their step loops.
class grammar_cache {
public:
  explicit grammar_cache(std::shared_ptr<const token_vocabulary> vocab, std::size_t capacity = 32)
    : vocab_(std::move(vocab)), capacity_(capacity) {}

  /// Throws grammar_error for text parse_gbnf refuses.
  auto get(const std::string& gbnf) -> std::shared_ptr<compiled_grammar>;
  auto vocabulary() const -> const std::shared_ptr<const token_vocabulary>& { return vocab_; }

private:
  auto find(const std::string& gbnf) -> std::shared_ptr<compiled_grammar>; ///< with the lock held

  std::shared_ptr<const token_vocabulary> vocab_;
  std::size_t capacity_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<compiled_grammar>>> lru_; ///< most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> by_text_;
  std::unordered_map<std::string, std::weak_ptr<compiled_grammar>> live_; ///< every one handed out
};

/// A request's grammar, compiled and its first mask taken (what the first
/// step would otherwise compute): on the tokenizer pool, before submission.
/// Throws grammar_error for text parse_gbnf refuses, and for a grammar too
/// costly to run (compiled_grammar::over_budget), naming the limits.
auto prepare_grammar(grammar_cache& cache, const std::string& gbnf) -> std::shared_ptr<compiled_grammar>;

/// The compiled `gbnf` from `cache`, or null for "". A backend's check:
/// the API layer compiled the same text already, so a failure here (or no
/// cache: a backend without the tokenizer's vocabulary) is a bug, not input.
auto compile_grammar(const std::string& gbnf, const std::shared_ptr<grammar_cache>& cache)
    -> std::shared_ptr<compiled_grammar>;

} // namespace troupe::grammar
