#include "service/tools/tool_parser.hpp"

#include "service/tools/harmony_parser.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace troupe::tools {
namespace {

auto is_space(char c) -> bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/// A JSON string's text, its quotes included, decoded; the raw text where it
/// does not decode.
auto decoded(const std::string& quoted) -> std::string {
  simdjson::dom::parser parser;
  simdjson::padded_string text(quoted);
  std::string_view s;
  if (parser.parse(text).get_string().get(s) != simdjson::SUCCESS) return quoted;
  return std::string(s);
}

/// One call object, {"name": "...", "arguments": ...}, read byte by byte:
/// the name is given once it is whole, the arguments' text as it comes.
class call_reader {
public:
  call_reader(std::size_t index, std::string id) : index_(index), id_(std::move(id)) {}

  /// One byte; false once the object has ended (the byte is not its).
  auto push(char c, parse_delta& out) -> bool {
    if (ended_) return false;
    if (depth_ == 0) { // before the object
      if (c == '{') depth_ = 1;
      return true;
    }
    if (in_value_) value_byte(c, out);
    else object_byte(c);
    return true;
  }
  auto ended() const -> bool { return ended_; }
  /// What is left (a call cut off): the name and arguments so far.
  void flush(parse_delta& out) {
    if (!named_ && !name_.empty()) {
      named_ = true;
      out.calls.push_back({index_, id_, decoded("\"" + name_ + "\""), pending_args_});
      pending_args_.clear();
    }
  }

private:
  // At the object's own level: keys, colons, commas, its end.
  void object_byte(char c) {
    if (in_key_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') {
        in_key_ = false;
        return;
      }
      key_ += c;
      return;
    }
    if (c == '"') {
      in_key_ = true;
      key_.clear();
    } else if (c == ':') {
      in_value_ = true;
      value_started_ = false;
    } else if (c == '}') {
      ended_ = true;
    }
  }

  // Inside a value: streamed (arguments), kept (name), or skipped.
  void value_byte(char c, parse_delta& out) {
    if (!value_started_) {
      if (is_space(c)) return;
      value_started_ = true;
      value_depth_ = 0;
      string_value_ = c == '"';
      raw_.clear();
    }
    // Does this byte end the value? (A scalar ends before ',' or '}'.)
    bool ends = false, included = true;
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') {
        in_string_ = false;
        ends = value_depth_ == 0;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++value_depth_;
    } else if (c == '}' || c == ']') {
      if (value_depth_ == 0) ends = true, included = false; // the object's own end after a scalar
      else ends = --value_depth_ == 0;
    } else if (c == ',' && value_depth_ == 0) {
      ends = true, included = false;
    }
    if (included) raw_ += c;
    const bool arguments = key_ == "arguments" || key_ == "parameters";
    if (arguments && !string_value_ && included) args(std::string_view(&c, 1), out);
    if (!ends) return;
    in_value_ = false;
    if (key_ == "name" && string_value_) {
      name_ = raw_.substr(1, raw_.size() - 2);
      name(out);
    } else if (arguments && string_value_) {
      args(decoded(raw_), out);
    }
    if (!included) object_byte(c); // the ',' or '}' is the object's
  }

  void name(parse_delta& out) {
    if (named_) return;
    named_ = true;
    out.calls.push_back({index_, id_, decoded("\"" + name_ + "\""), std::move(pending_args_)});
    pending_args_.clear();
  }

  void args(std::string_view text, parse_delta& out) {
    if (!named_) {
      pending_args_ += text; // (the name comes later in this object)
      return;
    }
    if (!out.calls.empty() && out.calls.back().index == index_) out.calls.back().arguments += text;
    else out.calls.push_back({index_, "", "", std::string(text)});
  }

  std::size_t index_;
  std::string id_;
  int depth_ = 0;
  bool ended_ = false;
  bool in_key_ = false, in_value_ = false, value_started_ = false, string_value_ = false;
  bool in_string_ = false, escape_ = false;
  int value_depth_ = 0;
  std::string key_, raw_, name_, pending_args_;
  bool named_ = false;
};

/// The longest suffix of `text` that begins `marker` (text to hold back).
auto marker_prefix_at_end(std::string_view text, std::string_view marker) -> std::size_t {
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  return 0;
}

/// Hermes / Qwen: <tool_call>{...}</tool_call>, any number; text around is content.
class hermes_parser final : public tool_parser {
public:
  explicit hermes_parser(id_source ids) : ids_(std::move(ids)) {}

  auto feed(std::string_view text) -> parse_delta override {
    parse_delta out;
    held_ += text;
    std::size_t at = 0;
    while (at < held_.size()) {
      if (call_) {
        if (!call_->ended()) {
          while (at < held_.size() && call_->push(held_[at], out)) ++at;
          continue;
        }
        // After the object: spaces, then the closing tag.
        while (at < held_.size() && is_space(held_[at])) ++at;
        const auto rest = std::string_view(held_).substr(at);
        if (rest.starts_with(k_close)) {
          at += k_close.size();
          call_.reset();
          ++calls_;
          after_call_ = true;
          continue;
        }
        if (std::string_view(k_close).starts_with(rest)) break; // more to come
        call_.reset(); // no closing tag: the call stands, the rest is content
        ++calls_;
        continue;
      }
      const auto rest = std::string_view(held_).substr(at);
      const auto open = rest.find(k_open);
      if (open != std::string_view::npos) {
        content(out, rest.substr(0, open));
        at += open + k_open.size();
        call_.emplace(calls_, ids_());
        continue;
      }
      const auto keep = marker_prefix_at_end(rest, k_open);
      content(out, rest.substr(0, rest.size() - keep));
      at = held_.size() - keep;
      break;
    }
    held_.erase(0, at);
    return out;
  }

  auto finish() -> parse_delta override {
    parse_delta out;
    if (call_) call_->flush(out);
    else content(out, held_);
    held_.clear();
    return out;
  }

private:
  static constexpr std::string_view k_open = "<tool_call>", k_close = "</tool_call>";
  // Content; the spaces between calls are not.
  void content(parse_delta& out, std::string_view text) {
    if (after_call_ && std::all_of(text.begin(), text.end(), is_space)) return;
    if (!text.empty()) after_call_ = false;
    out.content += text;
  }

  id_source ids_;
  std::string held_;
  std::optional<call_reader> call_;
  std::size_t calls_ = 0;
  bool after_call_ = false;
};

/// Calls as JSON objects in a list: Llama 3.x's, separated by ';' (after an
/// optional <|python_tag|>, opening the answer), and Mistral's JSON array
/// after [TOOL_CALLS].
class object_list_parser final : public tool_parser {
public:
  /// `marker`: what opens the calls ("" : a '{' opening the answer does);
  /// `anywhere`: the marker may come after content (else only first).
  object_list_parser(id_source ids, std::string_view marker, bool anywhere, bool optional_marker)
    : ids_(std::move(ids)), marker_(marker), anywhere_(anywhere), optional_marker_(optional_marker) {}

  auto feed(std::string_view text) -> parse_delta override {
    parse_delta out;
    held_ += text;
    std::size_t at = 0;
    while (at < held_.size()) {
      if (mode_ == mode::undecided) {
        const auto rest = std::string_view(held_).substr(at);
        const auto first = rest.find_first_not_of(" \n\r\t");
        if (first == std::string_view::npos) break; // only spaces yet
        const auto body = rest.substr(first);
        if (body.starts_with(marker_) && !marker_.empty()) {
          at += first + marker_.size();
          mode_ = mode::calls;
          continue;
        }
        if (!marker_.empty() && std::string_view(marker_).starts_with(body)) break; // maybe the marker
        if (optional_marker_ && body.front() == '{') {
          at += first;
          mode_ = mode::calls;
          continue;
        }
        mode_ = mode::content;
        continue;
      }
      if (mode_ == mode::content) {
        const auto rest = std::string_view(held_).substr(at);
        if (!anywhere_) {
          out.content += rest;
          at = held_.size();
          break;
        }
        const auto open = rest.find(marker_);
        if (open != std::string_view::npos) {
          out.content += rest.substr(0, open);
          at += open + marker_.size();
          mode_ = mode::calls;
          continue;
        }
        const auto keep = marker_prefix_at_end(rest, marker_);
        out.content += rest.substr(0, rest.size() - keep);
        at = held_.size() - keep;
        break;
      }
      // Calls: objects, with ',', ';', '[', ']' and spaces between them.
      if (call_ && !call_->ended()) {
        while (at < held_.size() && call_->push(held_[at], out)) ++at;
        continue;
      }
      const char c = held_[at];
      if (c == '{') {
        if (call_) ++calls_;
        call_.emplace(calls_, ids_());
        continue; // the reader takes the '{'
      }
      if (!(is_space(c) || c == ',' || c == ';' || c == '[' || c == ']')) {
        // Past the calls: the rest is content.
        if (call_) ++calls_, call_.reset();
        mode_ = mode::trailing;
      }
      if (mode_ == mode::trailing) {
        out.content += std::string_view(held_).substr(at);
        at = held_.size();
        break;
      }
      ++at;
    }
    held_.erase(0, at);
    return out;
  }

  auto finish() -> parse_delta override {
    parse_delta out;
    if (call_ && !call_->ended()) call_->flush(out);
    else if (mode_ != mode::calls) out.content += held_;
    held_.clear();
    return out;
  }

private:
  enum class mode : std::uint8_t { undecided, content, calls, trailing };
  id_source ids_;
  std::string marker_;
  bool anywhere_, optional_marker_;
  mode mode_ = mode::undecided;
  std::string held_;
  std::optional<call_reader> call_;
  std::size_t calls_ = 0;
};

} // namespace

auto tool_parser_names() -> std::vector<std::string> { return {"hermes", "llama3_json", "mistral", "harmony"}; }

auto make_tool_parser(std::string_view name, id_source ids) -> std::unique_ptr<tool_parser> {
  if (name == "hermes") return std::make_unique<hermes_parser>(std::move(ids));
  if (name == "llama3_json") return std::make_unique<object_list_parser>(std::move(ids), "<|python_tag|>", false, true);
  if (name == "mistral") return std::make_unique<object_list_parser>(std::move(ids), "[TOOL_CALLS]", true, false);
  if (name == "harmony") return std::make_unique<harmony_parser>(std::move(ids));
  return nullptr;
}

void merge(const parse_delta& d, std::string& content, std::vector<tool_call>& calls) {
  content += d.content;
  for (const auto& c : d.calls) {
    if (c.index >= calls.size()) calls.resize(c.index + 1);
    auto& call = calls[c.index];
    if (!c.id.empty()) call.id = c.id;
    if (!c.name.empty()) call.name = c.name;
    call.arguments += c.arguments;
  }
}

} // namespace troupe::tools
