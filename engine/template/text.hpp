#pragma once
// Python's str operations the templates lean on, over UTF-8: whitespace as
// str.strip() knows it (Unicode's, not just ASCII's), code-point length and
// slicing (s[:-1], s[::-1]), case changes (ASCII letters; text with other
// cased letters is refused: Python's full Unicode mapping is not here).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja::text {

/// The length in bytes of the whitespace character at s[i], 0 if none.
auto space_at(std::string_view s, std::size_t i) -> std::size_t;
/// The length in bytes of the whitespace character ending at s[end-1], 0 if none.
auto space_before(std::string_view s, std::size_t end) -> std::size_t;

auto lstrip(std::string_view s) -> std::string_view;
auto rstrip(std::string_view s) -> std::string_view;
auto strip(std::string_view s) -> std::string_view;
/// str.strip(chars) and its sides: removes any code point of `chars`.
auto strip_chars(std::string_view s, std::string_view chars, bool left, bool right) -> std::string_view;

/// The byte offsets where each code point starts, plus s.size() at the end.
auto code_point_starts(std::string_view s) -> std::vector<std::size_t>;
auto num_code_points(std::string_view s) -> std::size_t;

/// Throw render_error for text with non-ASCII letters that have a case.
auto upper(std::string_view s) -> std::string;
auto lower(std::string_view s) -> std::string;
/// str.capitalize(): the first letter upper, the rest lower.
auto capitalize(std::string_view s) -> std::string;
/// str.title(): each run of letters starts upper, continues lower.
auto title(std::string_view s) -> std::string;

/// str.split(sep, maxsplit) (sep empty: runs of whitespace, no empty parts).
auto split(std::string_view s, std::string_view sep, std::int64_t maxsplit, bool has_sep)
    -> std::vector<std::string>;
/// str.replace(old, new, count); count < 0 replaces all.
auto replace(std::string_view s, std::string_view from, std::string_view to, std::int64_t count) -> std::string;

} // namespace troupe::jinja::text
