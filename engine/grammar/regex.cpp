// A recursive-descent reader of the regex that writes GBNF as it goes:
// alternation, sequences, quantified atoms. Classes are kept as code-point
// ranges until written, so negation and the JSON-string escapes are exact.

#include "engine/grammar/regex.hpp"

#include "engine/grammar/grammar.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

namespace troupe::grammar {
namespace {

using range = std::pair<std::uint32_t, std::uint32_t>;
constexpr std::uint32_t max_cp = 0x10FFFF;

auto complement(std::vector<range> r) -> std::vector<range> {
  std::sort(r.begin(), r.end());
  std::vector<range> out;
  std::uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = std::max(next, hi + 1);
  }
  if (next <= max_cp) out.emplace_back(next, max_cp);
  return out;
}

auto class_escape(std::uint32_t cp) -> std::string {
  char buf[16];
  if (cp <= 0xFFFF) std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}


/// How a JSON string writes a character that must be escaped.
auto json_escape(std::uint32_t cp) -> std::string {
  switch (cp) {
  case '"': return "\\\"";
  case '\\': return "\\\\";
  case '\n': return "\\n";
  case '\r': return "\\r";
  case '\t': return "\\t";
  case '\b': return "\\b";
  case '\f': return "\\f";
  default: {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    return buf;
  }
  }
}

class reader {
public:
  reader(std::string_view re, regex_target target) : re_(re), target_(target) {}

  /// The pattern as one character set repeated (^A q$), or none.
  auto char_run_of() -> std::optional<char_run> {
    if (re_.size() < 3 || re_.front() != '^' || re_.back() != '$') return std::nullopt;
    const auto end = re_.size() - 1;
    pos_ = 1;
    char_run r;
    const char c = re_[pos_];
    if (c == '[') {
      r.set = read_class();
    } else if (c == '.') {
      ++pos_;
      r.set = complement({{'\n', '\n'}});
    } else if (c == '\\') {
      r.set = escape(false);
    } else if (std::string_view("()|*+?{$^").find(c) == std::string_view::npos) {
      const auto cp = read_utf8();
      r.set = {{cp, cp}};
    } else {
      return std::nullopt;
    }
    r.lo = r.hi = 1;
    if (pos_ < end && (re_[pos_] == '*' || re_[pos_] == '+' || re_[pos_] == '?')) {
      r.lo = re_[pos_] == '+' ? 1 : 0;
      r.hi = re_[pos_] == '?' ? 1 : -1;
      ++pos_;
    } else if (pos_ < end && re_[pos_] == '{') {
      ++pos_;
      r.lo = r.hi = number(end);
      if (pos_ < end && re_[pos_] == ',') {
        ++pos_;
        r.hi = pos_ < end && re_[pos_] == '}' ? -1 : number(end);
      }
      if (pos_ >= end || re_[pos_] != '}' || r.lo < 0 || (r.hi >= 0 && r.hi < r.lo)) return std::nullopt;
      ++pos_;
    }
    if (pos_ < end && re_[pos_] == '?') ++pos_; // (lazy: the same strings)
    return pos_ == end ? std::optional<char_run>(r) : std::nullopt;
  }

  /// The run as GBNF.
  auto emit_run(const char_run& r) -> std::string {
    if (r.set.empty()) {
      if (r.lo > 0) bad("a pattern and lengths that no string meets");
      return "\"\"";
    }
    return repeat_gbnf(emit_class(r.set), r.lo, r.hi);
  }

  auto run(bool search) -> std::string {
    bool anchored_start = false, anchored_end = false;
    if (!re_.empty() && re_[0] == '^') {
      anchored_start = true;
      pos_ = 1;
    }
    auto body = alternation();
    if (pos_ < re_.size() && re_[pos_] == '$') {
      anchored_end = true;
      ++pos_;
    }
    if (pos_ < re_.size()) fail(re_[pos_] == ')' ? "an unmatched ')'" : "'" + std::string(1, re_[pos_]) + "' here");
    if (!search) return "(" + body + ")";
    const auto any = emit_class(complement({{'\n', '\n'}})) + "*";
    return "(" + (anchored_start ? "" : any + " ") + body + (anchored_end ? "" : " " + any) + ")";
  }

private:
  std::string_view re_;
  regex_target target_;
  std::size_t pos_ = 0;
  int nesting_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw grammar_error("regex /" + std::string(re_) + "/ at " + std::to_string(pos_) + ": " + what +
                        " is not supported");
  }
  [[noreturn]] void bad(const std::string& what) const {
    throw grammar_error("regex /" + std::string(re_) + "/ at " + std::to_string(pos_) + ": " + what);
  }

  auto alternation() -> std::string {
    std::string out = sequence();
    while (pos_ < re_.size() && re_[pos_] == '|') {
      ++pos_;
      out += " | " + sequence();
    }
    return out;
  }

  auto sequence() -> std::string {
    std::string out;
    while (pos_ < re_.size() && re_[pos_] != '|' && re_[pos_] != ')') {
      if (re_[pos_] == '$' && pos_ + 1 == re_.size()) break;
      auto a = atom();
      a += quantifier();
      out += (out.empty() ? "" : " ") + a;
    }
    return out.empty() ? "\"\"" : out;
  }

  auto quantifier() -> std::string {
    if (pos_ >= re_.size()) return "";
    std::string q;
    const char c = re_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const auto close = re_.find('}', pos_);
      if (close == std::string_view::npos) bad("an unterminated '{'");
      const auto body = re_.substr(pos_ + 1, close - pos_ - 1);
      bool ok = !body.empty() && (body[0] >= '0' && body[0] <= '9');
      int commas = 0;
      for (const char b : body) {
        if (b == ',') ++commas;
        else if (b < '0' || b > '9') ok = false;
      }
      if (!ok || commas > 1) bad("a malformed {m,n}");
      q = "{" + std::string(body) + "}";
      pos_ = close + 1;
    } else {
      return "";
    }
    if (pos_ < re_.size() && re_[pos_] == '?') ++pos_;   // lazy: the same language
    if (pos_ < re_.size() && re_[pos_] == '+') fail("a possessive quantifier");
    if (pos_ < re_.size() && (re_[pos_] == '*' || re_[pos_] == '+' || re_[pos_] == '{')) bad("a quantifier after a quantifier");
    return q;
  }

  auto atom() -> std::string {
    const char c = re_[pos_];
    if (c == '(') {
      if (++nesting_ > 256) bad("groups nested over 256 deep");
      ++pos_;
      if (re_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (re_.substr(pos_, 2) == "?<" && re_.substr(pos_, 3) != "?<=" && re_.substr(pos_, 3) != "?<!") {
        const auto close = re_.find('>', pos_);
        if (close == std::string_view::npos) bad("an unterminated group name");
        pos_ = close + 1;
      } else if (re_.substr(pos_, 3) == "?P<") {
        const auto close = re_.find('>', pos_);
        if (close == std::string_view::npos) bad("an unterminated group name");
        pos_ = close + 1;
      } else if (pos_ < re_.size() && re_[pos_] == '?') {
        fail(re_.substr(pos_, 2) == "?=" || re_.substr(pos_, 2) == "?!" ? "lookahead"
             : re_.substr(pos_, 2) == "?<"                                ? "lookbehind"
                                                                          : "a group flag");
      }
      auto inner = alternation();
      if (pos_ >= re_.size() || re_[pos_] != ')') bad("a '(' without ')'");
      ++pos_;
      --nesting_;
      return "(" + inner + ")";
    }
    if (c == '[') return emit_class(read_class());
    if (c == '.') {
      ++pos_;
      return emit_class(complement({{'\n', '\n'}}));
    }
    if (c == '^' || c == '$') fail("an anchor inside the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') bad("a quantifier with nothing before it");
    if (c == '\\') {
      auto r = escape(false);
      return emit_class(r);
    }
    return emit_class({{read_utf8(), 0}}, true);
  }

  /// A decimal count (-1 when there is none), up to `end`.
  auto number(std::size_t end) -> std::int64_t {
    const auto start = pos_;
    std::int64_t v = 0;
    while (pos_ < end && re_[pos_] >= '0' && re_[pos_] <= '9' && v < (std::int64_t{1} << 40)) v = v * 10 + (re_[pos_++] - '0');
    return pos_ == start ? -1 : v;
  }

  auto read_utf8() -> std::uint32_t {
    const auto b = static_cast<unsigned char>(re_[pos_]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + static_cast<std::size_t>(n) > re_.size()) bad("text that is not UTF-8");
    std::uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(re_[pos_ + static_cast<std::size_t>(i)]) & 0x3F);
    pos_ += static_cast<std::size_t>(n);
    return cp;
  }

  auto hex(int digits) -> std::uint32_t {
    std::uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= re_.size()) bad("an unterminated escape");
      const char h = re_[pos_++];
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) bad("a bad hex digit");
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return v;
  }

  /// An escape at pos_ ('\\'), as code-point ranges.
  auto escape(bool in_class) -> std::vector<range> {
    ++pos_;
    if (pos_ >= re_.size()) bad("a trailing backslash");
    const char e = re_[pos_++];
    const std::vector<range> digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
        space{{'\t', '\r'}, {' ', ' '}};
    switch (e) {
    case 'd': return digit;
    case 'D': return complement(digit);
    case 'w': return word;
    case 'W': return complement(word);
    case 's': return space;
    case 'S': return complement(space);
    case 'n': return {{'\n', '\n'}};
    case 't': return {{'\t', '\t'}};
    case 'r': return {{'\r', '\r'}};
    case 'f': return {{'\f', '\f'}};
    case 'v': return {{'\v', '\v'}};
    case '0': return {{0, 0}};
    case 'x': { auto v = hex(2); return {{v, v}}; }
    case 'u': { auto v = hex(4); return {{v, v}}; }
    case 'b':
      if (in_class) return {{'\b', '\b'}};
      fail("\\b (a word boundary)");
    case 'B': fail("\\B");
    default:
      if (e >= '1' && e <= '9') fail("a backreference");
      if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) fail(std::string("\\") + e);
      return {{static_cast<unsigned char>(e), static_cast<unsigned char>(e)}};
    }
  }

  auto read_class() -> std::vector<range> {
    ++pos_; // [
    bool negate = false;
    if (pos_ < re_.size() && re_[pos_] == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<range> out;
    bool first = true;
    while (pos_ < re_.size() && (re_[pos_] != ']' || first)) {
      first = false;
      std::vector<range> lo_set;
      if (re_[pos_] == '\\') {
        lo_set = escape(true);
      } else {
        const auto cp = read_utf8();
        lo_set = {{cp, cp}};
      }
      if (lo_set.size() == 1 && lo_set[0].first == lo_set[0].second && pos_ + 1 < re_.size() && re_[pos_] == '-' &&
          re_[pos_ + 1] != ']') {
        ++pos_;
        std::vector<range> hi_set;
        if (re_[pos_] == '\\') hi_set = escape(true);
        else {
          const auto cp = read_utf8();
          hi_set = {{cp, cp}};
        }
        if (hi_set.size() != 1 || hi_set[0].first != hi_set[0].second) bad("a class range ending in a class");
        if (hi_set[0].first < lo_set[0].first) bad("a class range that runs backwards");
        out.emplace_back(lo_set[0].first, hi_set[0].first);
      } else {
        out.insert(out.end(), lo_set.begin(), lo_set.end());
      }
    }
    if (pos_ >= re_.size()) bad("a '[' without ']'");
    ++pos_;
    return negate ? complement(out) : out;
  }

  /// Code points as GBNF: a literal for one (`single`: the pair's first),
  /// else a class; in a JSON string, characters that need an escape become
  /// alternatives spelling it.
  auto emit_class(std::vector<range> r, bool single = false) -> std::string {
    if (single) r[0].second = r[0].first;
    std::sort(r.begin(), r.end());
    std::vector<range> plain;
    std::vector<std::uint32_t> escaped;
    for (auto [lo, hi] : r) {
      if (target_ == regex_target::json_string) {
        for (std::uint32_t cp = lo; cp <= hi && cp < 0x20; ++cp) escaped.push_back(cp);
        if (lo < 0x20) lo = 0x20;
        if (lo > hi) continue;
        for (const std::uint32_t special : {std::uint32_t{'"'}, std::uint32_t{'\\'}})
          if (lo <= special && special <= hi) escaped.push_back(special);
      }
      plain.emplace_back(lo, hi);
    }
    std::vector<std::string> alts;
    if (target_ == regex_target::json_string) {
      // Cut '"' and '\' out of the plain ranges.
      std::vector<range> cut;
      for (auto [lo, hi] : plain) {
        for (const std::uint32_t special : {std::uint32_t{'"'}, std::uint32_t{'\\'}}) {
          if (lo <= special && special <= hi) {
            if (lo < special) cut.emplace_back(lo, special - 1);
            lo = special + 1;
          }
        }
        if (lo <= hi) cut.emplace_back(lo, hi);
      }
      plain = std::move(cut);
    }
    if (plain.size() == 1 && plain[0].first == plain[0].second && escaped.empty()) return gbnf_literal(utf8_encode(plain[0].first));
    if (!plain.empty()) {
      std::string cls = "[";
      for (const auto& [lo, hi] : plain) cls += class_escape(lo) + (hi > lo ? "-" + class_escape(hi) : "");
      alts.push_back(cls + "]");
    }
    std::sort(escaped.begin(), escaped.end());
    escaped.erase(std::unique(escaped.begin(), escaped.end()), escaped.end());
    for (const auto cp : escaped) alts.push_back(gbnf_literal(json_escape(cp)));
    if (alts.empty()) bad("a class that matches nothing");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }
};

} // namespace

auto regex_to_gbnf(std::string_view re, regex_target target, bool search) -> std::string {
  return reader(re, target).run(search);
}

auto pattern_run(std::string_view re) -> std::optional<char_run> {
  try {
    return reader(re, regex_target::text).char_run_of();
  } catch (const grammar_error&) {
    return std::nullopt;
  }
}

auto length_run(std::int64_t lo, std::int64_t hi) -> char_run { return {{{0, max_cp}}, lo, hi}; }

auto intersect(const char_run& a, const char_run& b) -> char_run {
  auto x = a.set, y = b.set;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  char_run out;
  for (std::size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    const auto lo = std::max(x[i].first, y[j].first), hi = std::min(x[i].second, y[j].second);
    if (lo <= hi) out.set.emplace_back(lo, hi);
    (x[i].second < y[j].second ? i : j)++;
  }
  out.lo = std::max(a.lo, b.lo);
  out.hi = a.hi < 0 ? b.hi : b.hi < 0 ? a.hi : std::min(a.hi, b.hi);
  return out;
}

auto run_to_gbnf(const char_run& run, regex_target target) -> std::string {
  if (run.hi >= 0 && run.hi < run.lo) throw grammar_error("a pattern and lengths that no string meets");
  return reader("", target).emit_run(run);
}

auto repeat_gbnf(const std::string& item, std::int64_t lo, std::int64_t hi) -> std::string {
  constexpr std::int64_t block = 10000; // GBNF's most repetitions
  if (lo > block) throw grammar_error("a length over 10,000 required");
  const auto times = [&](std::int64_t m, std::int64_t n) {
    return "(" + item + "){" + std::to_string(m) + (n == m ? "" : "," + (n < 0 ? std::string() : std::to_string(n))) + "}";
  };
  if (hi < 0 || hi <= block) return times(lo, hi);
  // Past the limit: whole blocks of 10,000 and a rest, or all the blocks and the remainder.
  const auto rest = hi - lo, q = rest / block, r = rest % block;
  const auto whole = "(" + times(block, block) + ")";
  std::string out = lo > 0 ? times(lo, lo) + " " : std::string();
  if (rest <= block) return out + times(0, rest);
  std::string fewer = (q > 1 ? whole + "{0," + std::to_string(q - 1) + "} " : std::string()) + times(0, block - 1);
  return out + "(" + fewer + " | " + whole + "{" + std::to_string(q) + "} " + times(0, r) + ")";
}

} // namespace troupe::grammar
