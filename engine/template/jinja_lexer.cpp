#include "engine/template/jinja_lexer.hpp"

#include "base/utf8.hpp"

#include "engine/template/text.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

namespace troupe::jinja {

void fail_at(int line, int col, const std::string& problem) {
  throw template_error("line " + std::to_string(line) + " col " + std::to_string(col) + ": " + problem);
}

namespace {

auto is_digit(char c) -> bool { return c >= '0' && c <= '9'; }
auto is_name_start(char c) -> bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
auto is_name_char(char c) -> bool { return is_name_start(c) || is_digit(c); }

auto hex_value(std::string_view s, std::size_t at, std::size_t n, std::uint32_t& out) -> bool {
  if (at + n > s.size()) return false;
  out = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const char c = s[at + k];
    const int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    out = out * 16 + static_cast<std::uint32_t>(d);
  }
  return true;
}

class lexer {
public:
  explicit lexer(std::string_view source) {
    // \r\n and \r are newlines; one trailing newline goes (keep_trailing_newline off).
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  auto run() -> std::vector<token> {
    std::size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      auto open = pos;
      char kind = 0;
      for (; open + 1 < src_.size(); ++open)
        if (src_[open] == '{' && (src_[open + 1] == '{' || src_[open + 1] == '%' || src_[open + 1] == '#')) {
          kind = src_[open + 1];
          break;
        }
      if (kind == 0) {
        emit(token_kind::data, src_.substr(pos), pos);
        break;
      }
      auto data = std::string_view(src_).substr(pos, open - pos);
      const char sign = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+') ? src_[open + 2] : 0;
      if (sign == '-') {
        data = text::rstrip(data);
      } else if (sign != '+' && kind != '{') { // lstrip_blocks
        const auto l_pos = data.rfind('\n') == std::string_view::npos ? 0 : data.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting) && l_pos < data.size() && text::lstrip(data.substr(l_pos)).empty())
          data = data.substr(0, l_pos);
      }
      if (!data.empty()) emit(token_kind::data, std::string(data), pos);
      pos = open + 2 + (sign != 0 ? 1 : 0);
      if (kind == '#') {
        pos = comment(pos, open);
      } else {
        emit(kind == '{' ? token_kind::variable_begin : token_kind::block_begin, "", open);
        pos = tag(pos, kind == '%');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    emit(token_kind::eof, "", src_.size());
    return std::move(tokens_);
  }

private:
  void emit(token_kind kind, std::string text, std::size_t at) {
    const auto [line, col] = where(at);
    tokens_.push_back({kind, std::move(text), line, col});
  }

  auto where(std::size_t at) const -> std::pair<int, int> {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - 1;
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(at - *it) + 1};
  }

  [[noreturn]] void fail(std::size_t at, const std::string& problem) const {
    const auto [line, col] = where(at);
    fail_at(line, col, problem);
  }

  auto skip_space(std::size_t pos) const -> std::size_t {
    while (pos < src_.size() && text::space_at(src_, pos) > 0) pos += text::space_at(src_, pos);
    return pos;
  }

  /// Where the text after a block or comment end `close` ("%}", "#}") at `pos`
  /// resumes, or npos if none is there: "+%}", "-%}" and the whitespace after
  /// it, "%}" and one newline (trim_blocks).
  auto block_end(std::size_t pos, std::string_view close) const -> std::size_t {
    const auto at = [&](std::size_t p, std::string_view s) { return src_.compare(p, s.size(), s) == 0; };
    if (at(pos, "+") && at(pos + 1, close)) return pos + 3;
    if (at(pos, "-") && at(pos + 1, close)) return skip_space(pos + 3);
    if (at(pos, close)) return pos + 2 + (at(pos + 2, "\n") ? 1 : 0);
    return std::string::npos;
  }

  auto comment(std::size_t pos, std::size_t open) -> std::size_t {
    for (auto p = pos; p < src_.size(); ++p)
      if (const auto end = block_end(p, "#}"); end != std::string::npos) return end;
    fail(open, "missing end of comment tag");
  }

  auto tag(std::size_t pos, bool block) -> std::size_t {
    std::vector<char> balance;
    while (true) {
      pos = skip_space(pos);
      if (pos >= src_.size()) fail(pos, block ? "missing end of block tag %}" : "missing end of variable tag }}");
      if (balance.empty()) {
        if (block) {
          if (const auto end = block_end(pos, "%}"); end != std::string::npos) {
            emit(token_kind::block_end, "", pos);
            return end;
          }
        } else if (src_.compare(pos, 3, "-}}") == 0 || src_.compare(pos, 2, "}}") == 0) {
          emit(token_kind::variable_end, "", pos);
          return src_[pos] == '-' ? skip_space(pos + 3) : pos + 2;
        }
      }
      const char c = src_[pos];
      if (is_digit(c)) {
        pos = number(pos);
      } else if (is_name_start(c)) {
        auto end = pos;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        emit(token_kind::name, src_.substr(pos, end - pos), pos);
        pos = end;
      } else if (c == '\'' || c == '"') {
        pos = string(pos);
      } else {
        pos = op(pos, balance);
      }
    }
  }

  auto digits(std::size_t pos, std::string& out) const -> std::size_t { // (\d+_)*\d+
    auto p = pos;
    while (p < src_.size()) {
      if (is_digit(src_[p])) {
        out += src_[p++];
      } else if (src_[p] == '_' && p > pos && p + 1 < src_.size() && is_digit(src_[p + 1])) {
        ++p;
      } else {
        break;
      }
    }
    return p;
  }

  auto number(std::size_t pos) -> std::size_t {
    std::string text;
    auto p = digits(pos, text);
    bool real = false;
    if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      text += '.';
      p = digits(p + 1, text);
      real = true;
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      auto q = p + 1;
      std::string exp = "e";
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) exp += src_[q++];
      if (q < src_.size() && is_digit(src_[q])) {
        p = digits(q, exp);
        text += exp;
        real = true;
      }
    }
    emit(real ? token_kind::real : token_kind::integer, text, pos);
    return p;
  }

  // A Python string literal's escapes (jinja2 decodes them with "unicode-escape").
  auto string(std::size_t pos) -> std::size_t {
    const char quote = src_[pos];
    std::string out;
    auto p = pos + 1;
    while (true) {
      if (p >= src_.size()) fail(pos, "unterminated string");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) fail(pos, "unterminated string");
      const char e = src_[p + 1];
      p += 2;
      std::uint32_t cp = 0;
      switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (!hex_value(src_, p, n, cp) || cp > 0x10ffff) fail(p - 2, "bad \\" + std::string(1, e) + " escape in a string");
        append_utf8(out, cp);
        p += n;
        break;
      }
      case 'N': fail(p - 2, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          cp = static_cast<std::uint32_t>(e - '0');
          for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k, ++p)
            cp = cp * 8 + static_cast<std::uint32_t>(src_[p] - '0');
          append_utf8(out, cp);
        } else {
          out += '\\';
          out += e;
        }
      }
    }
    emit(token_kind::string, std::move(out), pos);
    return p + 1;
  }

  auto op(std::size_t pos, std::vector<char>& balance) -> std::size_t {
    static constexpr std::array<std::string_view, 6> two = {"//", "**", "==", "!=", "<=", ">="};
    for (const auto o : two)
      if (src_.compare(pos, 2, o) == 0) {
        emit(token_kind::op, std::string(o), pos);
        return pos + 2;
      }
    const char c = src_[pos];
    if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos)
      fail(pos, "unexpected character '" + std::string(1, c) + "'");
    if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty() || balance.back() != c) fail(pos, "unexpected '" + std::string(1, c) + "'");
      balance.pop_back();
    }
    emit(token_kind::op, std::string(1, c), pos);
    return pos + 1;
  }

  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<token> tokens_;
};

} // namespace

auto tokenize(std::string_view source) -> std::vector<token> { return lexer(source).run(); }

} // namespace troupe::jinja
