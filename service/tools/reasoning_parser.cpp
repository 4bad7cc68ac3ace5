#include "service/tools/reasoning_parser.hpp"

#include "engine/grammar/grammar.hpp"

namespace troupe::tools {
namespace {

/// The length of the longest suffix of `s` that is a proper prefix of `marker`.
auto partial_suffix(std::string_view s, std::string_view marker) -> std::size_t {
  for (std::size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

auto is_space(char c) -> bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

} // namespace

auto reasoning_parser::feed(std::string_view text) -> reasoning_split {
  reasoning_split out;
  held_ += text;
  if (state_ == state::opening) {
    std::size_t i = 0;
    while (i < held_.size() && is_space(held_[i])) ++i;
    const std::string_view rest = std::string_view(held_).substr(i);
    if (rest.starts_with(open_marker)) {
      held_.erase(0, i + open_marker.size());
      state_ = state::inside;
    } else if (open_marker.starts_with(rest)) {
      return out; // whitespace, or part of <think>: undecided
    } else {
      state_ = state::content;
    }
  }
  if (state_ == state::inside) {
    if (const auto end = held_.find(close_marker); end != std::string::npos) {
      out.reasoning = held_.substr(0, end);
      out.content = held_.substr(end + close_marker.size());
      held_.clear();
      state_ = state::content;
      return out;
    }
    const auto keep = partial_suffix(held_, close_marker);
    out.reasoning = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  out.content = std::move(held_);
  held_.clear();
  return out;
}

auto reasoning_parser::finish() -> reasoning_split {
  reasoning_split out;
  if (state_ == state::inside) out.reasoning = std::move(held_);
  else out.content = std::move(held_);
  held_.clear();
  state_ = state::content;
  return out;
}

auto reasoning_parser::grammar_after(std::string_view gbnf, bool inside) -> std::string {
  // Text without "</think>", as the states of matching it: think-qI has
  // read the marker's first I characters ('<' is its only '<', so a '<'
  // always starts a new match).
  std::string out = grammar::rename_rule(gbnf, "root", "troupe-answer");
  if (!out.empty() && out.back() != '\n') out += '\n'; // (the text may end inside its last rule)
  const std::string_view m = close_marker;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const auto q = [](std::size_t k) { return "think-q" + std::to_string(k); };
    std::string rule = q(i) + " ::= \"\"";
    if (i == 0) {
      rule += " | [^<] " + q(0) + " | \"<\" " + q(1);
    } else {
      const char next = m[i];
      if (i + 1 < m.size()) rule += " | " + grammar::gbnf_literal(std::string(1, next)) + " " + q(i + 1);
      rule += " | \"<\" " + q(1) + " | [^" + std::string(1, next) + "<] " + q(0);
    }
    out += rule + "\n";
  }
  const std::string block = "think-q0 \"</think>\" [ \\n]{0,4}";
  out += inside ? "root ::= " + block + " troupe-answer\n"
                : "root ::= ([ \\n]{0,4} \"<think>\" " + block + ")? troupe-answer\n";
  return out;
}

auto reasoning_parser::prompt_closes(std::string_view prompt) -> bool {
  const auto close = prompt.rfind(close_marker);
  if (close == std::string_view::npos) return false;
  for (const char c : prompt.substr(close + close_marker.size()))
    if (!is_space(c)) return false;
  return true;
}

auto reasoning_parser::prompt_opens(std::string_view prompt) -> bool {
  const auto open = prompt.rfind(open_marker);
  if (open == std::string_view::npos) return false;
  const auto close = prompt.rfind(close_marker);
  if (close != std::string_view::npos && close > open) return false;
  for (const char c : prompt.substr(open + open_marker.size()))
    if (!is_space(c)) return false;
  return true;
}

} // namespace troupe::tools
