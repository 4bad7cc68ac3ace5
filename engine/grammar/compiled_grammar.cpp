#include "engine/grammar/compiled_grammar.hpp"

#include "base/check.hpp"

#include <algorithm>
#include <limits>

namespace troupe::grammar {
namespace {

constexpr std::int32_t end_op = -1;
constexpr std::int32_t not_built = -2;
// Bounds on what one grammar may grow to. Past max_depth a parse path is
// dropped (JSON nested 128 deep); past max_states a new state is dead, so a
// pathological grammar ends its output rather than the server's memory.
constexpr std::int32_t max_depth = 128;
constexpr std::size_t max_states = 200'000;
constexpr std::size_t max_mask_bytes = std::size_t{64} << 20;

auto rule_op(std::int32_t rule) -> std::int32_t { return -(rule + 2); }
auto op_rule(std::int32_t op) -> std::int32_t { return -op - 2; }

} // namespace

auto compiled_grammar::vector_hash::operator()(const std::vector<std::int32_t>& v) const -> std::size_t {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const auto x : v) h = (h ^ static_cast<std::uint32_t>(x)) * 0x100000001b3ull;
  return static_cast<std::size_t>(h);
}

compiled_grammar::compiled_grammar(const grammar& g, std::shared_ptr<const token_vocabulary> vocab)
  : vocab_(std::move(vocab)), sets_(g.sets) {
  alt_starts_.resize(g.rules.size());
  for (std::size_t r = 0; r < g.rules.size(); ++r)
    for (const auto& alt : g.rules[r].alternatives) {
      alt_starts_[r].push_back(static_cast<std::int32_t>(code_.size()));
      for (const auto& e : alt) code_.push_back(e.what == element::kind::bytes ? e.index : rule_op(e.index));
      code_.push_back(end_op);
    }
  rest_.assign(code_.size(), 0);
  for (auto pc = static_cast<std::int64_t>(code_.size()) - 1; pc >= 0; --pc) {
    const auto op = code_[static_cast<std::size_t>(pc)];
    if (op == end_op) continue;
    const auto here = op >= 0 ? 1 : g.min_length[static_cast<std::size_t>(op_rule(op))];
    rest_[static_cast<std::size_t>(pc)] = here + rest_[static_cast<std::size_t>(pc) + 1];
  }
  std::vector<std::int32_t> tops;
  bool accepting = false;
  for (const auto a : alt_starts_[static_cast<std::size_t>(g.root)]) reach(a, -1);
  settle(tops, accepting);
  start_ = intern_state(std::move(tops), accepting);
}

auto compiled_grammar::intern_node(std::int32_t pc, std::int32_t parent) -> std::int32_t {
  const auto key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pc)) << 32) |
                   static_cast<std::uint32_t>(parent);
  if (auto it = node_ids_.find(key); it != node_ids_.end()) return it->second;
  stack_node n{pc, parent, rest_[static_cast<std::size_t>(pc)], 1};
  if (parent >= 0) {
    const auto& p = nodes_[static_cast<std::size_t>(parent)];
    n.min_rest += p.min_rest;
    n.depth = p.depth + 1;
  }
  const auto id = static_cast<std::int32_t>(nodes_.size());
  nodes_.push_back(n);
  node_ids_.emplace(key, id);
  return id;
}

void compiled_grammar::reach(std::int32_t pc, std::int32_t parent) {
  const auto key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pc)) << 32) |
                   static_cast<std::uint32_t>(parent);
  if (seen_.insert(key).second) todo_.emplace_back(pc, parent);
}

/// Expands the positions reach() queued (each with its return stack) down to
/// the byte sets they may read next: rules open (a rule last in its
/// alternative returns straight to the caller's caller, so a repetition runs
/// in constant stack), ends return. Each (position, stack) once: that breaks
/// loops through rules that match "", and keeps the work linear in the
/// positions reached. A loop, not recursion: a chain of nullable rules may be
/// as long as the grammar.
void compiled_grammar::settle(std::vector<std::int32_t>& tops, bool& accepting) {
  while (!todo_.empty()) {
    const auto [pc, parent] = todo_.back();
    todo_.pop_back();
    const auto op = code_[static_cast<std::size_t>(pc)];
    if (op == end_op) {
      if (parent < 0) {
        accepting = true;
      } else {
        const auto p = nodes_[static_cast<std::size_t>(parent)];
        reach(p.pc, p.parent);
      }
      continue;
    }
    if (parent >= 0 && nodes_[static_cast<std::size_t>(parent)].depth >= max_depth) continue;
    if (op >= 0) {
      tops.push_back(intern_node(pc, parent));
      continue;
    }
    const auto ret = code_[static_cast<std::size_t>(pc) + 1] == end_op ? parent : intern_node(pc + 1, parent);
    for (const auto a : alt_starts_[static_cast<std::size_t>(op_rule(op))]) reach(a, ret);
  }
  seen_.clear();
}

auto compiled_grammar::intern_state(std::vector<std::int32_t> tops, bool accepting) -> std::int32_t {
  if (tops.empty() && !accepting) return dead;
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
  auto key = tops;
  key.push_back(accepting ? -1 : -2);
  if (auto it = state_ids_.find(key); it != state_ids_.end()) return it->second;
  if (states_.size() >= max_states) return dead;
  if (tops.size() > max_stacks) { // (a state this wide makes every byte after it cost as much)
    too_wide_ = true;
    return dead;
  }
  state s;
  s.accepting = accepting;
  s.min_end = std::numeric_limits<std::int32_t>::max();
  if (accepting) s.min_end = 0;
  for (const auto t : tops) s.min_end = std::min(s.min_end, nodes_[static_cast<std::size_t>(t)].min_rest);
  s.stacks = std::move(tops);
  const auto id = static_cast<std::int32_t>(states_.size());
  states_.push_back(std::move(s));
  state_ids_.emplace(std::move(key), id);
  return id;
}

auto compiled_grammar::step(std::int32_t s, std::uint8_t byte) -> std::int32_t {
  auto& st = states_[static_cast<std::size_t>(s)];
  if (!st.next) {
    st.next = std::make_unique<std::array<std::int32_t, 256>>();
    st.next->fill(not_built);
  }
  if (const auto t = (*st.next)[byte]; t != not_built) return t;
  std::vector<std::int32_t> tops;
  bool accepting = false;
  for (const auto id : st.stacks) {
    const auto n = nodes_[static_cast<std::size_t>(id)];
    if (sets_[static_cast<std::size_t>(code_[static_cast<std::size_t>(n.pc)])].test(byte)) reach(n.pc + 1, n.parent);
  }
  settle(tops, accepting); // (may grow states_: `st` is not used after)
  const auto t = intern_state(std::move(tops), accepting);
  (*states_[static_cast<std::size_t>(s)].next)[byte] = t;
  return t;
}

auto compiled_grammar::advance(std::int32_t state, std::string_view bytes) -> std::int32_t {
  std::lock_guard lock(mutex_);
  for (const char c : bytes) {
    if (state == dead) break;
    state = step(state, static_cast<std::uint8_t>(c));
  }
  return state;
}

auto compiled_grammar::can_end(std::int32_t state) -> bool {
  std::lock_guard lock(mutex_);
  return state != dead && states_[static_cast<std::size_t>(state)].accepting;
}

auto compiled_grammar::min_bytes_to_end(std::int32_t state) -> std::int32_t {
  std::lock_guard lock(mutex_);
  TROUPE_CHECK(state != dead, "a dead grammar state has no end");
  return states_[static_cast<std::size_t>(state)].min_end;
}

auto compiled_grammar::forced_bytes(std::int32_t state, std::size_t limit) -> std::string {
  std::lock_guard lock(mutex_);
  std::string out;
  while (state != dead && out.size() < limit) {
    const auto& st = states_[static_cast<std::size_t>(state)];
    if (st.accepting) break;
    int only = -1;
    for (const auto id : st.stacks) {
      const auto& set = sets_[static_cast<std::size_t>(code_[static_cast<std::size_t>(nodes_[static_cast<std::size_t>(id)].pc)])];
      if (set.count() != 1) {
        only = -2;
        break;
      }
      int b = 0;
      while (!set.test(static_cast<std::size_t>(b))) ++b;
      if (only == -1) only = b;
      else if (only != b) only = -2;
      if (only == -2) break;
    }
    if (only < 0) break;
    out += static_cast<char>(only);
    state = step(state, static_cast<std::uint8_t>(only));
  }
  return out;
}

/// Walks the vocabulary's trie from state s, setting in all.bits every token
/// the grammar accepts (and all.worst_end); with `within`, also those whose
/// end fits `budget` bytes. Returns whether any token fit.
auto compiled_grammar::walk(std::int32_t s, std::int32_t budget, cached_mask& all, std::vector<std::uint64_t>* within)
    -> bool {
  const auto& nodes = vocab_->nodes();
  const auto& ids = vocab_->token_ids();
  walk_states_.resize(static_cast<std::size_t>(vocab_->max_depth()) + 1);
  walk_states_[0] = s;
  bool any_within = false;
  all.worst_end = 0;
  all.best_end = std::numeric_limits<std::int32_t>::max();
  std::uint64_t cost = 0;
  for (std::size_t i = 0; i < nodes.size();) {
    const auto& n = nodes[i];
    const auto from = walk_states_[n.depth - 1u];
    // The cost of a node: the parse stacks it steps (whether or not the
    // step is built already, so the limit does not depend on what other
    // requests built before).
    cost += states_[static_cast<std::size_t>(from)].stacks.size() + 1;
    if (cost > max_walk_cost) {
      all.costly = true;
      return false;
    }
    const auto t = step(from, n.byte);
    if (t == dead) {
      i = static_cast<std::size_t>(n.end);
      continue;
    }
    walk_states_[n.depth] = t;
    if (n.num_tokens > 0) {
      const auto end = states_[static_cast<std::size_t>(t)].min_end;
      all.worst_end = std::max(all.worst_end, end);
      all.best_end = std::min(all.best_end, end);
      const bool fits = within != nullptr && end <= budget;
      any_within = any_within || fits;
      for (auto k = n.first_token; k < n.first_token + n.num_tokens; ++k) {
        const auto id = static_cast<std::size_t>(ids[static_cast<std::size_t>(k)]);
        all.bits[id / 64] |= std::uint64_t{1} << (id % 64);
        if (fits) (*within)[id / 64] |= std::uint64_t{1} << (id % 64);
      }
    }
    ++i;
  }
  return any_within;
}

void compiled_grammar::fill_mask(std::int32_t state, std::int32_t tokens_left, std::vector<std::uint64_t>& mask) {
  std::lock_guard lock(mutex_);
  const auto words = (static_cast<std::size_t>(vocab_->size()) + 63) / 64;
  mask.assign(words, 0);
  if (state == dead) { // nothing can follow: the output ends
    for (const auto id : vocab_->end_ids())
      if (id >= 0 && id < vocab_->size())
        mask[static_cast<std::size_t>(id) / 64] |= std::uint64_t{1} << (static_cast<std::size_t>(id) % 64);
    return;
  }
  // After this token, tokens_left - 1 remain for the rest, one byte each,
  // and the last of them for an end token where there is one (the output
  // then finishes as "stop", not "length").
  const std::int32_t reserve = vocab_->end_ids().empty() ? 1 : 2;
  const std::int32_t budget = tokens_left >= 1 ? tokens_left - reserve : std::numeric_limits<std::int32_t>::max();
  auto it = masks_.find(state);
  if (it == masks_.end() || it->second.worst_end > budget) {
    cached_mask all;
    all.bits.assign(words, 0);
    bool tight = it != masks_.end(); // a cached mask whose worst end does not fit
    if (!tight) {
      walk(state, budget, all, nullptr);
      if (all.costly) { // too costly a state: no token, so the end ids below (the output ends)
        all.bits.assign(words, 0);
        all.worst_end = 0;
      }
      tight = all.worst_end > budget;
      if (mask_bytes_ > max_mask_bytes) {
        masks_.clear();
        mask_bytes_ = 0;
      }
      mask_bytes_ += words * sizeof(std::uint64_t);
      it = masks_.emplace(state, std::move(all)).first;
    }
    if (tight) {
      cached_mask scratch;
      scratch.bits.assign(words, 0);
      // Nothing fits (max_tokens is too short): the tokens that come closest,
      // unless the text may end here (then only the end ids, added below).
      const bool can_stop = states_[static_cast<std::size_t>(state)].accepting && !vocab_->end_ids().empty();
      if (!walk(state, budget, scratch, &mask) && !can_stop) walk(state, scratch.best_end, scratch, &mask);
    } else {
      mask = it->second.bits;
    }
  } else {
    mask = it->second.bits;
  }
  const auto& st = states_[static_cast<std::size_t>(state)];
  if (tokens_left == 1 && st.accepting && !vocab_->end_ids().empty()) {
    // The last token the request may have, and the text is whole: end it
    // ("stop"), rather than add a token that leaves it whole ("length").
    std::fill(mask.begin(), mask.end(), 0);
    for (const auto id : vocab_->end_ids())
      if (id >= 0 && id < vocab_->size())
        mask[static_cast<std::size_t>(id) / 64] |= std::uint64_t{1} << (static_cast<std::size_t>(id) % 64);
    return;
  }
  bool any = false;
  for (const auto w : mask) any = any || w != 0;
  if (st.accepting || !any)
    for (const auto id : vocab_->end_ids())
      if (id >= 0 && id < vocab_->size())
        mask[static_cast<std::size_t>(id) / 64] |= std::uint64_t{1} << (static_cast<std::size_t>(id) % 64);
}

auto compiled_grammar::costly(std::int32_t state) -> bool {
  std::lock_guard lock(mutex_);
  if (state == dead) return too_wide_;
  const auto it = masks_.find(state);
  return it != masks_.end() && it->second.costly;
}

auto compiled_grammar::width(std::int32_t state) -> std::size_t {
  std::lock_guard lock(mutex_);
  return state == dead ? 0 : states_[static_cast<std::size_t>(state)].stacks.size();
}

auto compiled_grammar::num_states() -> std::size_t {
  std::lock_guard lock(mutex_);
  return states_.size();
}

} // namespace troupe::grammar
