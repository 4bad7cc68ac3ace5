#include "engine/template/text.hpp"

#include "engine/template/value.hpp"

namespace troupe::jinja::text {
namespace {

auto is_lead(unsigned char c) -> bool { return (c & 0xc0) != 0x80; }

auto is_letter(char c) -> bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
auto to_upper(char c) -> char { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
auto to_lower(char c) -> char { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

/// Whether the code point is whitespace to Python's str.isspace().
auto is_space_cp(std::uint32_t cp) -> bool {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

auto decode(std::string_view s, std::size_t i, std::size_t& len) -> std::uint32_t {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  std::uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  len = n;
  return cp;
}

/// Whether a non-ASCII code point may have a case (the scripts with
/// upper and lower case letters, roughly): Python's full Unicode case
/// mapping is not reproduced, so such text is refused, never mis-cased.
auto may_be_cased(std::uint32_t cp) -> bool {
  static constexpr std::uint32_t ranges[][2] = {
      {0x00b5, 0x00b5},   {0x00c0, 0x024f},   {0x0250, 0x02af},   {0x0345, 0x0345},   {0x0370, 0x03ff},
      {0x0400, 0x052f},   {0x0530, 0x058f},   {0x10a0, 0x10ff},   {0x13a0, 0x13ff},   {0x1c80, 0x1cbf},
      {0x1d00, 0x1dbf},   {0x1e00, 0x1fff},   {0x2126, 0x2133},   {0x2160, 0x2188},   {0x24b6, 0x24e9},
      {0x2c00, 0x2d2f},   {0xa640, 0xa69f},   {0xa720, 0xa7ff},   {0xab30, 0xabbf},   {0xfb00, 0xfb17},
      {0xff21, 0xff5a},   {0x10400, 0x104ff}, {0x10c80, 0x10cff}, {0x118a0, 0x118df}, {0x16e40, 0x16e9f},
      {0x1e900, 0x1e95f}};
  for (const auto& r : ranges)
    if (cp >= r[0] && cp <= r[1]) return true;
  return false;
}

/// Throws when `s` holds a letter case functions would map differently
/// from Python.
void check_caseable(std::string_view s, const char* what) {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 1;
    if (may_be_cased(decode(s, i, len)))
      throw render_error(std::string(what) + "() of non-ASCII letters is not supported");
    i += len;
  }
}

} // namespace

auto space_at(std::string_view s, std::size_t i) -> std::size_t {
  std::size_t len = 0;
  return is_space_cp(decode(s, i, len)) ? len : 0;
}

auto space_before(std::string_view s, std::size_t end) -> std::size_t {
  std::size_t start = end - 1;
  while (start > 0 && !is_lead(static_cast<unsigned char>(s[start]))) --start;
  const auto n = space_at(s, start);
  return n == end - start ? n : 0;
}

auto lstrip(std::string_view s) -> std::string_view {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return s.substr(i);
}

auto rstrip(std::string_view s) -> std::string_view {
  std::size_t end = s.size();
  while (end > 0) {
    const auto n = space_before(s, end);
    if (n == 0) break;
    end -= n;
  }
  return s.substr(0, end);
}

auto strip(std::string_view s) -> std::string_view { return rstrip(lstrip(s)); }

auto strip_chars(std::string_view s, std::string_view chars, bool left, bool right) -> std::string_view {
  const auto starts = code_point_starts(chars);
  const auto in_chars = [&](std::string_view cp) {
    for (std::size_t k = 0; k + 1 < starts.size(); ++k)
      if (chars.substr(starts[k], starts[k + 1] - starts[k]) == cp) return true;
    return false;
  };
  const auto cps = code_point_starts(s);
  std::size_t first = 0, last = cps.size() - 1; // code point indices [first, last)
  if (left)
    while (first < last && in_chars(s.substr(cps[first], cps[first + 1] - cps[first]))) ++first;
  if (right)
    while (last > first && in_chars(s.substr(cps[last - 1], cps[last] - cps[last - 1]))) --last;
  return s.substr(cps[first], cps[last] - cps[first]);
}

auto code_point_starts(std::string_view s) -> std::vector<std::size_t> {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < s.size();) {
    out.push_back(i);
    std::size_t len = 1;
    (void)decode(s, i, len);
    i += len;
  }
  out.push_back(s.size());
  return out;
}

auto num_code_points(std::string_view s) -> std::size_t {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 1;
    (void)decode(s, i, len);
    i += len;
    ++n;
  }
  return n;
}

auto upper(std::string_view s) -> std::string {
  check_caseable(s, "upper");
  std::string out(s);
  for (auto& c : out) c = to_upper(c);
  return out;
}

auto lower(std::string_view s) -> std::string {
  check_caseable(s, "lower");
  std::string out(s);
  for (auto& c : out) c = to_lower(c);
  return out;
}

auto capitalize(std::string_view s) -> std::string {
  check_caseable(s, "capitalize");
  auto out = lower(s);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}

auto title(std::string_view s) -> std::string {
  check_caseable(s, "title");
  std::string out(s);
  bool previous_letter = false;
  for (auto& c : out) {
    c = previous_letter ? to_lower(c) : to_upper(c);
    previous_letter = is_letter(c);
  }
  return out;
}

auto split(std::string_view s, std::string_view sep, std::int64_t maxsplit, bool has_sep)
    -> std::vector<std::string> {
  std::vector<std::string> out;
  if (has_sep) {
    std::size_t at = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      const auto hit = s.find(sep, at);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(at, hit - at));
      at = hit + sep.size();
    }
    out.emplace_back(s.substr(at));
    return out;
  }
  std::size_t i = 0;
  while (true) {
    while (i < s.size() && space_at(s, i) > 0) i += space_at(s, i);
    if (i == s.size()) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(i)); // the remainder keeps its trailing whitespace
      break;
    }
    const auto start = i;
    while (i < s.size() && space_at(s, i) == 0) ++i;
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

auto replace(std::string_view s, std::string_view from, std::string_view to, std::int64_t count) -> std::string {
  std::string out;
  if (from.empty()) { // Python inserts `to` around every code point
    const auto starts = code_point_starts(s);
    std::int64_t done = 0;
    for (std::size_t k = 0; k + 1 < starts.size(); ++k) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += s.substr(starts[k], starts[k + 1] - starts[k]);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  std::size_t at = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const auto hit = s.find(from, at);
    if (hit == std::string_view::npos) break;
    out += s.substr(at, hit - at);
    out += to;
    at = hit + from.size();
    ++done;
  }
  out += s.substr(at);
  return out;
}

} // namespace troupe::jinja::text
