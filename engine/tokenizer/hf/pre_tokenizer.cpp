#include "engine/tokenizer/hf/pre_tokenizer.hpp"

#include "engine/tokenizer/hf/unicode.hpp"

#include <algorithm>
#include <utility>

namespace troupe::hf {
namespace {

// GPT-2's pre-tokenizer regex (ByteLevel's use_regex).
constexpr auto gpt2_pattern =
    std::string_view{R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"};

struct span_match {
  std::size_t begin, end;
  bool is_match;
};

auto parse_behavior(std::string_view b) -> split_behavior {
  if (b == "Isolated") return split_behavior::isolated;
  if (b == "Removed") return split_behavior::removed;
  if (b == "MergedWithPrevious") return split_behavior::merged_with_previous;
  if (b == "MergedWithNext") return split_behavior::merged_with_next;
  if (b == "Contiguous") return split_behavior::contiguous;
  throw hf_error("pre_tokenizer Split behavior \"" + std::string(b) + "\" is not supported");
}

/// Matches (covering all of a text) to the pieces to keep, as HF's
/// NormalizedString::split does; ranges may be empty (dropped later).
auto apply_behavior(const std::vector<span_match>& m, split_behavior behavior,
                    std::vector<std::pair<std::size_t, std::size_t>>& out) -> void {
  out.clear();
  switch (behavior) {
  case split_behavior::isolated:
    for (const auto& s : m) out.emplace_back(s.begin, s.end);
    break;
  case split_behavior::removed:
    for (const auto& s : m)
      if (!s.is_match) out.emplace_back(s.begin, s.end);
    break;
  case split_behavior::contiguous: {
    auto previous = false;
    for (const auto& s : m) {
      if (s.is_match == previous && !out.empty()) out.back().second = s.end;
      else out.emplace_back(s.begin, s.end);
      previous = s.is_match;
    }
    break;
  }
  case split_behavior::merged_with_previous: {
    auto previous = false;
    for (const auto& s : m) {
      if (s.is_match && !previous && !out.empty()) out.back().second = s.end;
      else out.emplace_back(s.begin, s.end);
      previous = s.is_match;
    }
    break;
  }
  case split_behavior::merged_with_next: {
    auto previous = false;
    for (auto i = m.size(); i-- > 0;) {
      const auto& s = m[i];
      if (s.is_match && !previous && !out.empty()) out.back().first = s.begin;
      else out.emplace_back(s.begin, s.end);
      previous = s.is_match;
    }
    std::reverse(out.begin(), out.end());
    break;
  }
  }
}

/// Adds the gaps between `matches` (sorted, disjoint) as non-matches.
auto cover(std::size_t size, const std::vector<std::pair<std::size_t, std::size_t>>& matches, bool invert,
           std::vector<span_match>& out) -> void {
  out.clear();
  auto prev = std::size_t{0};
  for (const auto& [b, e] : matches) {
    if (prev != b) out.push_back({prev, b, invert});
    out.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != size || size == 0) out.push_back({prev, size, invert});
}

auto replace_spaces(std::string_view text, std::string_view with) -> std::string {
  auto out = std::string{};
  out.reserve(text.size() + 8);
  for (const char c : text) {
    if (c == ' ') out.append(with);
    else out.push_back(c);
  }
  return out;
}

} // namespace

pre_tokenizer::pre_tokenizer(std::optional<dom::element> json) {
  if (json) add(*json);
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].what != kind::byte_level) continue;
    if (i + 1 != steps_.size())
      throw hf_error("pre_tokenizer: a step after ByteLevel is not supported");
    byte_level_ = true;
  }
}

pre_tokenizer::pre_tokenizer(std::span<const std::string_view> regexes) {
  for (const auto r : regexes) {
    auto st = step{};
    st.what = kind::split_regex;
    st.re = std::make_unique<regex>(r);
    steps_.push_back(std::move(st));
  }
  auto st = step{};
  st.what = kind::byte_level;
  steps_.push_back(std::move(st));
  byte_level_ = true;
}

auto pre_tokenizer::add(dom::element json) -> void {
  const auto type = type_of(json, "pre_tokenizer");
  auto st = step{};
  if (type == "Sequence") {
    auto list = dom::array{};
    if (json["pretokenizers"].get_array().get(list) != simdjson::SUCCESS)
      throw hf_error("pre_tokenizer Sequence has no \"pretokenizers\" list");
    for (const auto item : list) add(item);
    return;
  }
  if (type == "Split") {
    const auto pattern = field(json, "pattern");
    if (!pattern) throw hf_error("pre_tokenizer Split has no \"pattern\"");
    if (const auto s = opt_string(*pattern, "String")) {
      st.what = kind::split_string;
      st.pattern = std::string(*s);
    } else if (const auto r = opt_string(*pattern, "Regex")) {
      st.what = kind::split_regex;
      st.re = std::make_unique<regex>(*r);
    } else {
      throw hf_error("pre_tokenizer Split: pattern is neither String nor Regex");
    }
    st.behavior = parse_behavior(string_field(json, "behavior", "pre_tokenizer Split"));
    st.invert = bool_field(json, "invert", false);
  } else if (type == "ByteLevel") {
    st.what = kind::byte_level;
    st.add_prefix_space = bool_field(json, "add_prefix_space", true);
    if (bool_field(json, "use_regex", true)) st.re = std::make_unique<regex>(gpt2_pattern);
  } else if (type == "Digits") {
    st.what = kind::digits;
    st.individual_digits = bool_field(json, "individual_digits", false);
  } else if (type == "Metaspace") {
    st.what = kind::metaspace;
    const auto replacement = string_field(json, "replacement", "pre_tokenizer Metaspace");
    st.pattern = std::string(replacement);
    st.split = bool_field(json, "split", true);
    if (const auto scheme = opt_string(json, "prepend_scheme")) {
      if (*scheme == "always") st.prepend_scheme = 0;
      else if (*scheme == "first") st.prepend_scheme = 1;
      else if (*scheme == "never") st.prepend_scheme = 2;
      else throw hf_error("pre_tokenizer Metaspace prepend_scheme \"" + std::string(*scheme) + "\" is not supported");
    } else {
      st.prepend_scheme = bool_field(json, "add_prefix_space", true) ? 0 : 2; // before prepend_scheme existed
    }
  } else {
    unsupported("pre_tokenizer", type);
  }
  steps_.push_back(std::move(st));
}

auto pre_tokenizer::apply(const step& st, pre_token&& in, std::vector<pre_token>& out) const -> void {
  thread_local std::vector<std::pair<std::size_t, std::size_t>> matches;
  thread_local std::vector<span_match> covered;
  thread_local std::vector<std::pair<std::size_t, std::size_t>> kept;
  auto text = std::move(in.text);
  auto behavior = st.behavior;
  matches.clear();
  switch (st.what) {
  case kind::split_string:
    if (!st.pattern.empty())
      for (auto pos = text.find(st.pattern); pos != std::string::npos; pos = text.find(st.pattern, pos + st.pattern.size()))
        matches.emplace_back(pos, pos + st.pattern.size());
    break;
  case kind::split_regex:
    st.re->for_each_match(text, [&](std::size_t b, std::size_t e) { matches.emplace_back(b, e); });
    break;
  case kind::byte_level:
    if (st.add_prefix_space && !text.starts_with(' ')) text.insert(0, 1, ' ');
    if (!st.re) {
      if (!text.empty()) out.push_back({std::move(text), in.at_start});
      return;
    }
    st.re->for_each_match(text, [&](std::size_t b, std::size_t e) { matches.emplace_back(b, e); });
    behavior = split_behavior::isolated;
    break;
  case kind::digits: {
    behavior = st.individual_digits ? split_behavior::isolated : split_behavior::contiguous;
    // Each numeric character is a match; contiguous merges runs.
    for (auto at = std::size_t{0}; at < text.size();) {
      auto c = char32_t{0};
      const auto n = decode_utf8(text, at, c);
      if (is_numeric(c)) matches.emplace_back(at, at + n);
      at += n;
    }
    break;
  }
  case kind::metaspace: {
    text = replace_spaces(text, st.pattern);
    const auto prepend = st.prepend_scheme == 0 || (st.prepend_scheme == 1 && in.at_start);
    if (prepend && !text.starts_with(st.pattern)) text.insert(0, st.pattern);
    if (!st.split) {
      if (!text.empty()) out.push_back({std::move(text), in.at_start});
      return;
    }
    for (auto pos = text.find(st.pattern); pos != std::string::npos; pos = text.find(st.pattern, pos + st.pattern.size()))
      matches.emplace_back(pos, pos + st.pattern.size());
    behavior = split_behavior::merged_with_next;
    break;
  }
  }
  cover(text.size(), matches, st.invert, covered);
  apply_behavior(covered, behavior, kept);
  for (const auto& [b, e] : kept)
    if (e > b) out.push_back({text.substr(b, e - b), in.at_start && b == 0});
}

auto pre_tokenizer::split(std::string_view segment, bool at_start, std::vector<pre_token>& out,
                          std::vector<pre_token>& scratch) const -> void {
  if (segment.empty()) return;
  if (steps_.empty()) {
    out.push_back({std::string(segment), at_start});
    return;
  }
  scratch.clear();
  scratch.push_back({std::string(segment), at_start});
  auto next = std::vector<pre_token>{};
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    auto& dest = i + 1 == steps_.size() ? out : next;
    if (&dest == &next) next.clear();
    for (auto& p : scratch) apply(steps_[i], std::move(p), dest);
    if (&dest == &next) std::swap(scratch, next);
  }
}

} // namespace troupe::hf
