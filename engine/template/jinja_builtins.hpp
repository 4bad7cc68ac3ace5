#pragma once
// jinja2's filters and tests, Python's str/dict/list methods and the value
// operations (attribute and item lookup, arithmetic, comparison, `in`) with
// the semantics of jinja2 3.1 in transformers' ImmutableSandboxedEnvironment.
// A failure is a render_error with jinja2's reason.

#include "engine/template/value.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::jinja {

/// Whether troupe renders the filter / test of this name (the parser refuses
/// the others at parse time).
auto is_known_filter(std::string_view name) -> bool;
auto is_known_test(std::string_view name) -> bool;

auto apply_filter(std::string_view name, const value& subject, const call_args& args) -> value;
auto apply_test(std::string_view name, const value& subject, const call_args& args) -> bool;

/// jinja2's getattr (x.name: a method first, then the item) and getitem
/// (x[key]: the item first, then a method); Undefined where neither exists.
/// Throws on an Undefined subject, as jinja2 does.
auto get_attr(const value& subject, std::string_view name) -> value;
auto get_item(const value& subject, const value& key) -> value;
/// x[start:stop:step] over a list or a string's code points.
auto get_slice(const value& subject, const value& start, const value& stop, const value& step) -> value;

/// + - * / // % ** and ~ (op is the operator's text).
auto binary_op(std::string_view op, const value& a, const value& b) -> value;
/// -x, +x.
auto unary_minus(const value& a, bool negate) -> value;
/// == != < > <= >= in "not in".
auto compare_op(std::string_view op, const value& a, const value& b) -> bool;

/// The items Python's iter(x) yields: a list's items, a dict's keys, a
/// string's characters; Undefined is empty. Throws for other values.
auto iterate(const value& v) -> array;

/// The number of items (len(x)), throwing where Python does.
auto length_of(const value& v) -> std::int64_t;

/// Python's type name of a value ("str", "dict", "tuple", ...), for messages.
auto type_name(const value& v) -> std::string;

/// str.format with plain fields ("{}", "{0}", "{name}", "{{", "}}"); a
/// conversion, format spec or attribute in a field is refused.
auto str_format(const std::string& s, const call_args& args) -> value;
/// Python's s % args for %s, %r, %d, %i and %% (and %(key)s with a
/// mapping); flags, widths and other conversions are refused.
auto percent_format(const std::string& s, const value& args) -> value;

} // namespace troupe::jinja
