// Python's two string formattings, as far as chat templates use them:
// str.format with plain fields and printf-style str % args.

#include "engine/template/jinja_builtins.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace troupe::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { throw render_error(what); }

} // namespace

/// str.format with plain fields ("{}", "{0}", "{name}", "{{", "}}"); a
/// conversion, format spec or attribute in a field is refused.
auto str_format(const std::string& s, const call_args& a) -> value {
  std::string out;
  std::size_t next_auto = 0;
  bool automatic = false, manual = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') ++i;
      else type_error("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const auto close = s.find('}', i);
    if (close == std::string::npos) type_error("Single '{' encountered in format string");
    const auto field = s.substr(i + 1, close - i - 1);
    i = close;
    if (field.find_first_of("!:.[{") != std::string::npos) type_error("str.format fields other than {}, {0}, {name} are not supported");
    const value* v = nullptr;
    if (field.empty()) {
      automatic = true;
      v = next_auto < a.positional.size() ? &a.positional[next_auto] : nullptr;
      ++next_auto;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      manual = true;
      const auto k = std::stoull(field.size() > 6 ? std::string("999999") : field);
      v = k < a.positional.size() ? &a.positional[k] : nullptr;
    } else {
      for (const auto& [key, x] : a.named)
        if (key == field) v = &x;
    }
    if (automatic && manual) type_error("cannot switch between automatic and manual field numbering");
    if (v == nullptr) type_error("str.format: no argument for {" + field + "}");
    out += to_str(*v);
  }
  return out;
}

/// Python's str % args for %s, %r, %d, %i and %% (and %(key)s with a
/// mapping); flags, widths and other conversions are refused.
auto percent_format(const std::string& s, const value& args) -> value {
  // A tuple gives the arguments; what has __getitem__ (a dict, a list,
  // Undefined, a range: Python takes it for a mapping) serves %(key)s;
  // anything else is the one argument.
  const bool mapping = (args.is_object() && !args.obj().is_namespace) || args.is_undefined() ||
                       (args.is_array() && !args.is_tuple()) ||
                       (args.is_lazy() && args.lazy().k == sequence::kind::range);
  array positional;
  if (args.is_tuple()) positional = args.arr();
  else if (!mapping) positional.push_back(args);
  std::size_t used = 0;
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (++i >= s.size()) type_error("incomplete format");
    const value* arg = nullptr;
    if (s[i] == '(') {
      const auto close = s.find(')', i);
      if (close == std::string::npos) type_error("incomplete format key");
      if (!mapping) type_error("format requires a mapping");
      const auto key = s.substr(i + 1, close - i - 1);
      if (!args.is_object()) type_error("'" + type_name(args) + "' has no item '" + key + "'");
      arg = args.obj().find(key);
      if (arg == nullptr) type_error("KeyError: '" + key + "'");
      i = close + 1;
      if (i >= s.size()) type_error("incomplete format");
    }
    const char c = s[i];
    if (c == '%' && arg == nullptr) {
      out += '%';
      continue;
    }
    if (c != 's' && c != 'r' && c != 'd' && c != 'i')
      type_error("'%' formatting other than %s, %r, %d, %i and %% is not supported");
    if (arg == nullptr) {
      if (mapping && !args.is_tuple()) type_error("format requires a mapping");
      if (used >= positional.size()) type_error("not enough arguments for format string");
      arg = &positional[used++];
    }
    if (c == 's') {
      out += to_str(*arg);
    } else if (c == 'r') {
      out += to_repr(*arg);
    } else {
      if (!arg->is_number()) type_error("%d format: a real number is required, not " + type_name(*arg));
      out += arg->is_real() ? (std::isfinite(arg->as_real()) && std::fabs(arg->as_real()) < 9.2e18
                                   ? std::to_string(static_cast<std::int64_t>(arg->as_real()))
                                   : (type_error("%d of a float out of range is not supported"), std::string{}))
                            : std::to_string(arg->as_int());
    }
  }
  if (!mapping && used < positional.size()) type_error("not all arguments converted during string formatting");
  return out;
}

} // namespace troupe::jinja
