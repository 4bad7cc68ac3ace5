// GBNF text to a byte grammar. Repetitions become helper rules (x* is
// `r ::= x r |`, right-recursive, which the matcher runs as a loop), and a
// character class becomes the UTF-8 byte sequences of its code points.

#include "engine/grammar/grammar.hpp"

#include "base/utf8.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <unordered_map>
#include <utility>

namespace troupe::grammar {
namespace {

constexpr std::uint32_t max_code_point = 0x10FFFF;
constexpr int max_repetition = 10000; // {m,n} beyond this is surely a mistake
constexpr int max_nesting = 256;      // of parentheses: the reader recurses

using range = std::pair<std::uint32_t, std::uint32_t>; // code points, inclusive


/// Splits [lo, hi] (same UTF-8 length) until each piece is a product of byte
/// ranges, as RE2's and Rust regex's UTF-8 compilers do.
void utf8_sequences(std::uint32_t lo, std::uint32_t hi, std::vector<std::vector<range>>& out) {
  static constexpr std::array<std::uint32_t, 4> last_of_length = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (std::size_t n = 0; n + 1 < last_of_length.size(); ++n) {
    const auto edge = last_of_length[n];
    if (lo <= edge && hi > edge) {
      utf8_sequences(lo, edge, out);
      utf8_sequences(edge + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{lo, hi}});
    return;
  }
  const auto length = utf8_encode(lo).size();
  for (std::size_t i = 1; i < length; ++i) {
    const std::uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  const auto a = utf8_encode(lo), b = utf8_encode(hi);
  std::vector<range> seq;
  for (std::size_t i = 0; i < a.size(); ++i)
    seq.emplace_back(static_cast<unsigned char>(a[i]), static_cast<unsigned char>(b[i]));
  out.push_back(std::move(seq));
}

struct set_hash {
  auto operator()(const byte_set& s) const -> std::size_t { return std::hash<byte_set>{}(s); }
};

class parser {
public:
  explicit parser(std::string_view text) : text_(text) {}

  auto run() -> grammar {
    skip_space();
    while (pos_ < text_.size()) {
      const auto rule_start = pos_;
      const auto name = read_name();
      if (name.empty()) fail(pos_, "expected a rule name");
      skip_space();
      if (text_.substr(pos_, 3) != "::=") fail(pos_, "expected '::=' after '" + name + "'");
      pos_ += 3;
      const auto id = rule_id(name);
      if (defined_.at(static_cast<std::size_t>(id))) fail(rule_start, "rule '" + name + "' is defined twice");
      defined_[static_cast<std::size_t>(id)] = true;
      auto alts = read_alternatives(false);
      g_.rules[static_cast<std::size_t>(id)].alternatives = std::move(alts);
      skip_space();
    }
    for (std::size_t i = 0; i < g_.rules.size(); ++i)
      if (!defined_[i]) fail(first_use_[i], "undefined rule '" + g_.rules[i].name + "'");
    const auto root = names_.find("root");
    if (root == names_.end()) throw grammar_error("the grammar has no rule named 'root'");
    g_.root = root->second;
    check();
    return std::move(g_);
  }

private:
  std::string_view text_;
  std::size_t pos_ = 0;
  grammar g_;
  std::map<std::string, std::int32_t, std::less<>> names_;
  std::vector<bool> defined_;
  std::vector<std::size_t> first_use_; // where each rule is first named (for 'undefined rule')
  std::unordered_map<byte_set, std::int32_t, set_hash> set_ids_;
  int helpers_ = 0;
  int nesting_ = 0;

  auto where(std::size_t at) const -> std::pair<int, int> {
    int line = 1, col = 1;
    for (std::size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return {line, col};
  }
  [[noreturn]] void fail(int line, int col, const std::string& what) const {
    throw grammar_error("line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    const auto [line, col] = where(at);
    fail(line, col, what);
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  static auto is_name_char(char c) -> bool {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  auto read_name() -> std::string {
    const auto start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  /// Whether a `name ::=` starts at pos_ (the end of the current rule).
  auto at_rule_start() const -> bool {
    auto p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  auto rule_id(const std::string& name) -> std::int32_t {
    if (auto it = names_.find(name); it != names_.end()) return it->second;
    const auto id = static_cast<std::int32_t>(g_.rules.size());
    g_.rules.push_back({name, {}});
    names_.emplace(name, id);
    defined_.push_back(false);
    first_use_.push_back(pos_ - name.size());
    return id;
  }
  auto helper(std::vector<std::vector<element>> alts) -> element {
    const auto id = static_cast<std::int32_t>(g_.rules.size());
    g_.rules.push_back({"_" + std::to_string(helpers_++), std::move(alts)});
    defined_.push_back(true);
    first_use_.push_back(0);
    return {element::kind::rule, id};
  }
  auto set_element(const byte_set& s) -> element {
    auto [it, added] = set_ids_.try_emplace(s, static_cast<std::int32_t>(g_.sets.size()));
    if (added) g_.sets.push_back(s);
    return {element::kind::bytes, it->second};
  }
  auto byte_element(unsigned char b) -> element {
    byte_set s;
    s.set(b);
    return set_element(s);
  }

  auto read_alternatives(bool nested) -> std::vector<std::vector<element>> {
    std::vector<std::vector<element>> alts;
    alts.push_back(read_sequence(nested));
    while (pos_ < text_.size() && text_[pos_] == '|') {
      ++pos_;
      alts.push_back(read_sequence(nested));
    }
    return alts;
  }

  auto read_sequence(bool nested) -> std::vector<element> {
    std::vector<element> seq;
    for (;;) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] == '|') break;
      if (text_[pos_] == ')') {
        if (!nested) fail(pos_, "unexpected ')'");
        break;
      }
      if (!nested && at_rule_start()) break;
      const auto start = seq.size();
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        while (pos_ < text_.size() && text_[pos_] != '"') {
          for (const char b : utf8_encode(read_char())) seq.push_back(byte_element(static_cast<unsigned char>(b)));
        }
        if (pos_ >= text_.size()) fail(pos_, "unterminated string literal");
        ++pos_;
      } else if (c == '[') {
        seq.push_back(read_class());
      } else if (c == '.') {
        ++pos_;
        seq.push_back(class_element({{0, max_code_point}}));
      } else if (c == '(') {
        if (++nesting_ > max_nesting) fail(pos_, "parentheses nested over " + std::to_string(max_nesting) + " deep");
        ++pos_;
        auto alts = read_alternatives(true);
        --nesting_;
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != ')') fail(pos_, "expected ')'");
        ++pos_;
        seq.push_back(helper(std::move(alts)));
      } else if (is_name_char(c)) {
        const auto at = pos_;
        const auto name = read_name();
        (void)at;
        seq.push_back({element::kind::rule, rule_id(name)});
      } else {
        fail(pos_, std::string("unexpected character '") + c + "'");
      }
      read_postfix(seq, start);
    }
    return seq;
  }

  /// Applies * + ? {m,n} to the last item (seq[start, end), one item).
  void read_postfix(std::vector<element>& seq, std::size_t start) {
    if (pos_ >= text_.size()) return;
    const char c = text_[pos_];
    int lo = 0, hi = -1; // -1: unbounded
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
    } else if (c == '?') {
      ++pos_;
      hi = 1;
    } else if (c == '{') {
      ++pos_;
      lo = read_count();
      hi = lo;
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        hi = (pos_ < text_.size() && text_[pos_] == '}') ? -1 : read_count();
      }
      if (pos_ >= text_.size() || text_[pos_] != '}') fail(pos_, "expected '}'");
      ++pos_;
      if (hi >= 0 && hi < lo) fail(pos_, "{m,n} needs m <= n");
    } else {
      return;
    }
    std::vector<element> item(seq.begin() + static_cast<std::ptrdiff_t>(start), seq.end());
    seq.resize(start);
    const auto one = item.size() == 1 ? item[0] : helper({item});
    for (int i = 0; i < lo; ++i) seq.push_back(one);
    if (hi < 0) {
      // r ::= one r | ""
      const auto id = static_cast<std::int32_t>(g_.rules.size());
      const element self{element::kind::rule, id};
      helper({{one, self}, {}});
      seq.push_back(self);
    } else if (hi > lo) {
      // (one (one (...)?)?)? built inside out
      std::optional<element> tail;
      for (int i = lo; i < hi; ++i) {
        std::vector<element> body{one};
        if (tail) body.push_back(*tail);
        tail = helper({body, {}});
      }
      seq.push_back(*tail);
    }
  }

  auto read_count() -> int {
    const auto start = pos_;
    long v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + (text_[pos_] - '0');
      if (v > max_repetition) fail(start, "a repetition count over " + std::to_string(max_repetition));
      ++pos_;
    }
    if (pos_ == start) fail(pos_, "expected a number");
    return static_cast<int>(v);
  }

  auto read_hex(int digits) -> std::uint32_t {
    std::uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size()) fail(pos_, "unterminated escape");
      const char h = text_[pos_];
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      if (d < 0) fail(pos_, "expected a hex digit");
      v = v * 16 + static_cast<std::uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  /// One character of a literal or class, escapes resolved; a code point.
  auto read_char() -> std::uint32_t {
    const auto at = pos_;
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (pos_ >= text_.size()) fail(at, "unterminated escape");
      const char e = text_[pos_++];
      std::uint32_t cp = 0;
      switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '^': case '.': case '/': return static_cast<unsigned char>(e);
      case 'x': cp = read_hex(2); break;
      case 'u': cp = read_hex(4); break;
      case 'U': cp = read_hex(8); break;
      default: fail(at, std::string("unknown escape '\\") + e + "'");
      }
      if (cp > max_code_point || (cp >= 0xD800 && cp <= 0xDFFF)) fail(at, "escape names no Unicode scalar value");
      return cp;
    }
    // A UTF-8 character of the text itself.
    const auto ch = front_char(text_.substr(pos_));
    if (!ch.valid) fail(at, "the grammar text is not UTF-8");
    const auto cp = static_cast<std::uint32_t>(code_point_at(text_, pos_, ch.length));
    pos_ += ch.length;
    return cp;
  }

  auto read_class() -> element {
    const auto at = pos_;
    ++pos_; // [
    bool negate = false;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<range> ranges;
    while (pos_ < text_.size() && text_[pos_] != ']') {
      const auto lo = read_char();
      auto hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = read_char();
        if (hi < lo) fail(at, "a class range runs backwards");
      }
      ranges.emplace_back(lo, hi);
    }
    if (pos_ >= text_.size()) fail(at, "unterminated character class");
    ++pos_;
    if (negate) ranges = complement(ranges);
    if (ranges.empty()) fail(at, "a character class that matches nothing");
    return class_element(ranges);
  }

  static auto complement(std::vector<range> ranges) -> std::vector<range> {
    std::sort(ranges.begin(), ranges.end());
    std::vector<range> out;
    std::uint32_t next = 0;
    for (const auto& [lo, hi] : ranges) {
      if (lo > next) out.emplace_back(next, lo - 1);
      next = std::max(next, hi + 1);
    }
    if (next <= max_code_point) out.emplace_back(next, max_code_point);
    return out;
  }

  /// The code points of `ranges` (surrogates left out) as one element: a
  /// byte set when all are ASCII, else a helper rule of byte sequences.
  auto class_element(std::vector<range> ranges) -> element {
    std::vector<range> clean;
    for (auto [lo, hi] : ranges) {
      if (lo <= 0xD7FF) clean.emplace_back(lo, std::min<std::uint32_t>(hi, 0xD7FF));
      if (hi >= 0xE000) clean.emplace_back(std::max<std::uint32_t>(lo, 0xE000), hi);
    }
    std::vector<std::vector<range>> seqs;
    for (const auto& [lo, hi] : clean) utf8_sequences(lo, hi, seqs);
    // Merge the one-byte sequences, and the sequences that differ only in their last byte range.
    std::map<std::vector<range>, byte_set> by_prefix;
    for (const auto& s : seqs) {
      std::vector<range> prefix(s.begin(), s.end() - 1);
      auto& last = by_prefix[prefix];
      for (auto b = s.back().first; b <= s.back().second; ++b) last.set(b);
    }
    if (by_prefix.size() == 1 && by_prefix.begin()->first.empty()) return set_element(by_prefix.begin()->second);
    std::vector<std::vector<element>> alts;
    for (const auto& [prefix, last] : by_prefix) {
      std::vector<element> alt;
      for (const auto& [lo, hi] : prefix) {
        byte_set s;
        for (auto b = lo; b <= hi; ++b) s.set(b);
        alt.push_back(set_element(s));
      }
      alt.push_back(set_element(last));
      alts.push_back(std::move(alt));
    }
    return helper(std::move(alts));
  }

  /// Finite derivations for every rule, and no left recursion.
  void check() {
    min_lengths();
    refuse_left_recursion();
  }

  /// Each rule's fewest bytes, Knuth's generalization of Dijkstra: a rule is
  /// settled at the smallest length among alternatives whose rules are all
  /// settled, so every element is looked at a bounded number of times,
  /// whatever order the rules come in (a fixpoint over the whole grammar
  /// would take a pass per link of a chain).
  void min_lengths() {
    const auto n = g_.rules.size();
    constexpr std::int64_t inf = std::numeric_limits<std::int32_t>::max();
    struct alt_state {
      std::int32_t rule;
      std::int64_t sum = 0;
      std::size_t open = 0; // its rule elements not settled yet
    };
    std::vector<alt_state> alts;
    std::vector<std::vector<std::size_t>> users(n); // per rule: the alternatives naming it, once per use
    using entry = std::pair<std::int64_t, std::int32_t>;
    std::priority_queue<entry, std::vector<entry>, std::greater<>> ready;
    for (std::size_t r = 0; r < n; ++r)
      for (const auto& alt : g_.rules[r].alternatives) {
        alt_state a{static_cast<std::int32_t>(r)};
        for (const auto& e : alt) {
          if (e.what == element::kind::bytes) {
            ++a.sum;
          } else {
            ++a.open;
            users[static_cast<std::size_t>(e.index)].push_back(alts.size());
          }
        }
        if (a.open == 0) ready.emplace(a.sum, a.rule);
        alts.push_back(a);
      }
    auto& len = g_.min_length;
    len.assign(n, static_cast<std::int32_t>(inf));
    std::vector<bool> settled(n, false);
    while (!ready.empty()) {
      const auto [l, r] = ready.top();
      ready.pop();
      if (settled[static_cast<std::size_t>(r)]) continue;
      settled[static_cast<std::size_t>(r)] = true;
      len[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(std::min(l, inf));
      for (const auto i : users[static_cast<std::size_t>(r)]) {
        auto& a = alts[i];
        a.sum = std::min(inf, a.sum + l);
        if (--a.open == 0) ready.emplace(a.sum, a.rule);
      }
    }
    for (std::size_t r = 0; r < n; ++r)
      if (!settled[r] || len[r] == inf)
        throw grammar_error("rule '" + g_.rules[r].name + "' never ends: every alternative refers back to itself");
  }

  /// Left recursion: a rule reached again before any byte is read. A walk
  /// with a stack of its own: a chain of rules may be as long as the text.
  void refuse_left_recursion() {
    const auto n = g_.rules.size();
    const auto& len = g_.min_length;
    struct frame {
      std::int32_t rule;
      std::size_t alt = 0, elem = 0;
    };
    std::vector<int> mark(n, 0); // 0 new, 1 on the path, 2 done
    std::vector<frame> path;
    for (std::size_t start = 0; start < n; ++start) {
      if (mark[start] != 0) continue;
      mark[start] = 1;
      path.push_back({static_cast<std::int32_t>(start)});
      while (!path.empty()) {
        auto& f = path.back();
        const auto& alts = g_.rules[static_cast<std::size_t>(f.rule)].alternatives;
        if (f.alt == alts.size()) {
          mark[static_cast<std::size_t>(f.rule)] = 2;
          path.pop_back();
          continue;
        }
        const auto& alt = alts[f.alt];
        if (f.elem == alt.size() || alt[f.elem].what == element::kind::bytes) {
          ++f.alt;
          f.elem = 0;
          continue;
        }
        const auto next = alt[f.elem].index;
        if (mark[static_cast<std::size_t>(next)] == 1) left_recursive(path, next);
        if (len[static_cast<std::size_t>(next)] > 0) { // not nullable: later ones come after a byte
          ++f.alt;
          f.elem = 0;
        } else {
          ++f.elem;
        }
        if (mark[static_cast<std::size_t>(next)] == 0) { // (after f's last use: the push may move it)
          mark[static_cast<std::size_t>(next)] = 1;
          path.push_back({next});
        }
      }
    }
  }

  template <class Path>
  [[noreturn]] void left_recursive(const Path& path, std::int32_t rule) {
    // Named by the first rule of the cycle the user wrote (not a helper).
    auto it = std::find_if(path.begin(), path.end(), [&](const auto& f) { return f.rule == rule; });
    for (; it != path.end(); ++it)
      if (g_.rules[static_cast<std::size_t>(it->rule)].name[0] != '_')
        throw grammar_error("rule '" + g_.rules[static_cast<std::size_t>(it->rule)].name + "' is left-recursive");
    throw grammar_error("rule '" + g_.rules[static_cast<std::size_t>(rule)].name + "' is left-recursive");
  }
};

} // namespace

auto parse_gbnf(std::string_view text) -> grammar { return parser(text).run(); }

} // namespace troupe::grammar
