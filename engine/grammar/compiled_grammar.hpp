#pragma once
// A grammar run over bytes as a lazily built automaton, and the token masks
// of its states. A state is a set of parse stacks (llama.cpp's grammar
// stacks), interned: the same stacks are the same state id, so transitions
// (state, byte) -> state and each state's token mask are computed once and
// then only looked up, for every request that uses the grammar. The mask
// walks the vocabulary's trie from the state, pruning a subtree at the first
// byte the grammar refuses (XGrammar and llguidance work from the same trie).
//
// Deterministic: state ids depend on the order of the calls, but what a
// state accepts and every mask do not. Thread-safe: one mutex, held while a
// call looks up or builds (the requests of a batch that share a grammar
// mostly need the same masks, so a waiter would have built the same one).

#include "base/types.hpp"
#include "engine/grammar/grammar.hpp"
#include "engine/grammar/token_vocabulary.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace troupe::grammar {

class compiled_grammar {
public:
  static constexpr std::int32_t dead = -1;
  /// The most parse stacks one state may hold, and the most (trie node x
  /// stack) steps one mask may take: past them a grammar is too costly to
  /// run (costly(); the API refuses one whose start is).
  static constexpr std::size_t max_stacks = 1 << 16;
  static constexpr std::uint64_t max_walk_cost = std::uint64_t{1} << 26;

  compiled_grammar(const grammar& g, std::shared_ptr<const token_vocabulary> vocab);

  auto start() const -> std::int32_t { return start_; }
  auto vocabulary() const -> const token_vocabulary& { return *vocab_; }

  /// The state after `bytes` from `state`, or dead.
  auto advance(std::int32_t state, std::string_view bytes) -> std::int32_t;
  /// Whether the text so far is a whole sentence of the grammar.
  auto can_end(std::int32_t state) -> bool;
  /// The fewest bytes that make it one (0 where it can end).
  auto min_bytes_to_end(std::int32_t state) -> std::int32_t;
  /// The bytes every continuation starts with, up to `limit`, stopping where
  /// the grammar could end or could take two bytes: what jump-forward may
  /// write without asking the model.
  auto forced_bytes(std::int32_t state, std::size_t limit) -> std::string;

  /// Sets in `mask` (one bit per id, vocabulary().size() bits) the tokens the
  /// grammar accepts next, end ids where it can end. With tokens_left >= 1
  /// (this token included), a token is allowed only if what it leaves can
  /// still be finished in the tokens after it, counting one token per byte
  /// and keeping the last for an end id (where the vocabulary has one)
  /// (every byte has a token in a byte-fallback or byte-level vocabulary):
  /// the output always ends as a sentence of the grammar. When no token
  /// keeps that promise, those that leave the fewest bytes are; when the grammar
  /// accepts no token at all, the end ids are (so the output ends). At the
  /// last token (tokens_left 1) of a whole sentence, only the end ids are.
  void fill_mask(std::int32_t state, std::int32_t tokens_left, std::vector<std::uint64_t>& mask);

  /// Whether `state` is past the limits (max_stacks, max_walk_cost): dead
  /// because a state grew too wide, or its mask (fill_mask took it) went
  /// over. The limits count steps, never time, so this is deterministic.
  auto costly(std::int32_t state) -> bool;

  /// The parse stacks `state` holds: its width, what each byte from it costs
  /// (for tests and the benchmark).
  auto width(std::int32_t state) -> std::size_t;

  /// States built so far (for tests and the benchmark).
  auto num_states() -> std::size_t;

private:
  struct stack_node {
    std::int32_t pc = 0;       ///< a byte-set element (top) or the return position
    std::int32_t parent = -1;  ///< -1: the bottom
    std::int32_t min_rest = 0; ///< fewest bytes to empty the stack from here
    std::int32_t depth = 1;
  };
  struct state {
    std::vector<std::int32_t> stacks; ///< stack tops (stack_node ids), sorted
    bool accepting = false;
    std::int32_t min_end = 0;
    std::unique_ptr<std::array<std::int32_t, 256>> next; ///< -2: not built yet
  };
  struct cached_mask {
    std::vector<std::uint64_t> bits;
    std::int32_t worst_end = 0; ///< the most bytes to end left by an allowed token
    std::int32_t best_end = 0;  ///< the fewest
    bool costly = false;        ///< the walk went past max_walk_cost (no token then)
  };
  struct vector_hash {
    auto operator()(const std::vector<std::int32_t>& v) const -> std::size_t;
  };

  auto intern_node(std::int32_t pc, std::int32_t parent) -> std::int32_t;
  void reach(std::int32_t pc, std::int32_t parent);
  void settle(std::vector<std::int32_t>& tops, bool& accepting);
  auto intern_state(std::vector<std::int32_t> tops, bool accepting) -> std::int32_t;
  auto step(std::int32_t s, std::uint8_t byte) -> std::int32_t; ///< with the lock held
  auto walk(std::int32_t s, std::int32_t budget, cached_mask& all, std::vector<std::uint64_t>* within) -> bool;

  std::shared_ptr<const token_vocabulary> vocab_;
  // The flat program: per alternative its elements, then end. >= 0: a byte
  // set; -1: end of the alternative; <= -2: rule -(x + 2).
  std::vector<std::int32_t> code_;
  std::vector<std::int32_t> rest_; ///< per pc: fewest bytes to the alternative's end
  std::vector<std::vector<std::int32_t>> alt_starts_; ///< per rule
  std::vector<byte_set> sets_;

  std::mutex mutex_;
  std::vector<stack_node> nodes_;
  std::unordered_map<std::uint64_t, std::int32_t> node_ids_;
  std::vector<state> states_;
  std::unordered_map<std::vector<std::int32_t>, std::int32_t, vector_hash> state_ids_;
  std::unordered_map<std::int32_t, cached_mask> masks_;
  std::size_t mask_bytes_ = 0;
  std::vector<std::int32_t> walk_states_;
  std::unordered_set<std::uint64_t> seen_;                 ///< settle's (position, stack) pairs
  std::vector<std::pair<std::int32_t, std::int32_t>> todo_; ///< and those it has yet to expand
  std::int32_t start_ = dead;
  bool too_wide_ = false; ///< a state grew past max_stacks (it was made dead)
};

} // namespace troupe::grammar
