#include "service/tools/harmony_parser.hpp"

#include "engine/grammar/grammar.hpp"

#include <algorithm>

namespace troupe::tools {
namespace {

constexpr std::string_view message_marker = "<|message|>";
constexpr std::string_view start_marker = "<|start|>";
constexpr std::string_view body_ends[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
/// A header longer than this without <|message|> is not one.
constexpr std::size_t max_header = 512;

/// Whether s is a proper start of one of `words`.
template <class Words>
auto starts_one(std::string_view s, const Words& words) -> bool {
  return std::any_of(std::begin(words), std::end(words),
                     [&](std::string_view w) { return s.size() < w.size() && w.starts_with(s); });
}

/// The word after `key` in a header (up to white space or a marker), or "".
auto word_after(std::string_view header, std::string_view key) -> std::string_view {
  const auto at = header.find(key);
  if (at == std::string_view::npos) return {};
  auto rest = header.substr(at + key.size());
  const auto end = rest.find_first_of(" \t\n<");
  return rest.substr(0, end);
}

} // namespace

auto harmony_parser::grammar(std::string_view gbnf) -> std::string {
  std::string out = grammar::rename_rule(gbnf, "root", "harmony-after");
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "harmony-analysis ::= \"<|channel|>analysis<|message|>\" [^<]* \"<|end|><|start|>assistant\"\n";
  out += "root ::= harmony-analysis? harmony-after\n";
  return out;
}

auto harmony_parser::final_grammar(std::string_view gbnf) -> std::string {
  std::string out = grammar::rename_rule(gbnf, "root", "harmony-answer");
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "harmony-final ::= \"<|channel|>final<|message|>\" harmony-answer\n";
  return grammar(out + "root ::= harmony-final\n");
}

auto harmony_parser::feed(std::string_view text) -> parse_delta {
  parse_delta d;
  buf_ += text;
  while (step(d)) {
  }
  return d;
}

auto harmony_parser::finish() -> parse_delta {
  parse_delta d;
  if (state_ == state::header) sink_ = sink::content; // an unfinished header is text
  emit(buf_, d);
  buf_.clear();
  if (state_ == state::body) close_message(d);
  return d;
}

auto harmony_parser::step(parse_delta& d) -> bool {
  if (buf_.empty()) return false;
  if (state_ == state::plain) {
    emit(buf_, d);
    buf_.clear();
    return false;
  }
  return state_ == state::header ? header_step(d) : body_step(d);
}

// A header runs to <|message|>; text that cannot open one (it opens with
// neither a marker nor " to=") turns the rest of the output into content.
auto harmony_parser::header_step(parse_delta& d) -> bool {
  // Whether the text can open a header, decided before <|message|> is
  // looked for: the same answer however the text is cut into pieces.
  std::string_view lead(buf_);
  lead.remove_prefix(std::min(lead.find_first_not_of(" \n"), lead.size()));
  const bool may_open = lead.empty() || lead.starts_with("<|") || lead.starts_with("to=") ||
                        starts_one(lead, markers) || std::string_view("to=").starts_with(lead);
  const auto at = buf_.find(message_marker);
  if (may_open && at != std::string::npos && at <= max_header) {
    const std::string header = buf_.substr(0, at);
    buf_.erase(0, at + message_marker.size());
    open_message(header, d);
    state_ = state::body;
    return true;
  }
  if (may_open && buf_.size() <= max_header) return false;
  state_ = state::plain;
  sink_ = sink::content;
  return true;
}

// A body runs to the marker that ends it (or a new message's start); text
// that may be a marker's start is held back.
auto harmony_parser::body_step(parse_delta& d) -> bool {
  std::size_t at = std::string::npos;
  std::string_view marker;
  for (const auto m : body_ends)
    if (const auto p = buf_.find(m); p < at) at = p, marker = m;
  if (at != std::string::npos) {
    emit(std::string_view(buf_).substr(0, at), d);
    close_message(d);
    buf_.erase(0, marker == start_marker ? at : at + marker.size());
    state_ = state::header;
    return true;
  }
  auto keep = buf_.rfind('<');
  if (keep == std::string::npos || !starts_one(std::string_view(buf_).substr(keep), body_ends)) keep = buf_.size();
  emit(std::string_view(buf_).substr(0, keep), d);
  buf_.erase(0, keep);
  return false;
}

void harmony_parser::open_message(std::string_view header, parse_delta& d) {
  const auto recipient = word_after(header, "to=");
  const auto channel = word_after(header, "<|channel|>");
  if (recipient.starts_with("functions.")) {
    sink_ = sink::call;
    call_args_ = false;
    d.calls.push_back({calls_++, ids_(), std::string(recipient.substr(10)), {}});
  } else {
    // analysis (built-in tools' messages too) is reasoning; final and a
    // preamble (commentary to nobody) are content.
    sink_ = channel == "analysis" ? sink::reasoning : sink::content;
  }
}

// A call with no arguments' text gets "{}", which every client parses.
void harmony_parser::close_message(parse_delta& d) {
  if (sink_ == sink::call && !call_args_) emit("{}", d);
}

void harmony_parser::emit(std::string_view text, parse_delta& d) {
  if (text.empty()) return;
  switch (sink_) {
    case sink::reasoning: d.reasoning += text; break;
    case sink::content: d.content += text; break;
    case sink::call:
      call_args_ = true;
      if (!d.calls.empty() && d.calls.back().index + 1 == calls_) d.calls.back().arguments += text;
      else d.calls.push_back({calls_ - 1, {}, {}, std::string(text)});
      break;
  }
}

} // namespace troupe::tools
