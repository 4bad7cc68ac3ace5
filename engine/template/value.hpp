#pragma once
// The values a Jinja template computes with: JSON's (null, bool, int, float,
// string, array, object keeping insertion order) plus jinja2's Undefined and
// callables (globals, macros, bound string/dict methods). Python semantics
// where chat templates depend on them: truthiness, equality (1 == 1.0 ==
// True), str() and repr() ("1.0", "True", "None", "['a']"), json.dumps.

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::jinja {

class value;
using array = std::vector<value>;

/// A dict with string keys in insertion order (Python's); lookups scan, the
/// objects of a chat are small. A namespace() is an object that `set ns.x`
/// may change: it is shared by reference, every other value is immutable.
struct object {
  std::vector<std::pair<std::string, value>> entries;
  bool is_namespace = false;

  [[nodiscard]] auto find(std::string_view key) const -> const value*;
  void set(std::string key, value v);
};

/// A call's arguments: positional, then keyword (in the call's order).
struct call_args {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> named;

  /// The argument at position `i` or named `name`; nullptr if absent.
  [[nodiscard]] auto get(std::size_t i, std::string_view name) const -> const value*;
};

/// A global function, macro or bound method.
struct function {
  std::string name;
  std::function<value(const call_args&)> call;
};

/// What Python holds as a lazy sequence, kept apart from lists because
/// jinja2 treats it differently: the generators of select, map, unique, ...
/// (truthy even when empty, no len(), printed as an address, read once),
/// dict views of .items()/.keys()/.values() and range objects (printed as
/// "dict_items([...])" and "range(0, 3)").
struct sequence {
  enum class kind { generator, view, range };
  kind k = kind::generator;
  std::function<array()> produce; ///< the items; may throw render_error (a generator fails when read)
  std::string label;              ///< view: "dict_items"; range: its repr
  mutable bool consumed = false;  ///< a generator read once is empty after
};

/// A render-time failure (raise_exception, a type error, undefined access):
/// one line, like jinja2's exception text.
struct render_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The most text a render builds in one string (its output, a join, a
/// tojson): far past any prompt a model takes, short of memory a request
/// could exhaust (a deep tool schema under tojson(indent=4) grows
/// thousandfold). Past it, render_error.
inline constexpr std::size_t max_text_bytes = std::size_t{1} << 26;
void check_text_size(std::size_t bytes);

/// The template's own raise_exception(message): the message alone, as
/// transformers shows it.
struct raised_error : render_error {
  using render_error::render_error;
};

class value {
public:
  enum class kind : std::uint8_t { undefined, none, boolean, integer, real, string, array, object, function, lazy };

  value() = default; ///< undefined
  static auto none() -> value;
  value(bool b) : v_(b) {}
  value(int i) : v_(std::int64_t{i}) {}
  value(std::int64_t i) : v_(i) {}
  value(double d) : v_(d) {}
  value(std::string s) : v_(std::move(s)) {}
  value(std::string_view s) : v_(std::string(s)) {}
  value(const char* s) : v_(std::string(s)) {}
  value(array a) : v_(std::make_shared<const array>(std::move(a))) {}
  value(object o) : v_(std::make_shared<object>(std::move(o))) {}
  value(std::shared_ptr<object> o) : v_(std::move(o)) {}
  value(function f) : v_(std::make_shared<const function>(std::move(f))) {}
  value(sequence s) : v_(std::make_shared<const sequence>(std::move(s))) {}
  /// A Python tuple: a list that prints as ('a', 1) (dict items, literals).
  static auto tuple(array a) -> value;

  [[nodiscard]] auto type() const -> kind { return static_cast<kind>(v_.index()); }
  [[nodiscard]] auto is_undefined() const -> bool { return type() == kind::undefined; }
  [[nodiscard]] auto is_none() const -> bool { return type() == kind::none; }
  [[nodiscard]] auto is_bool() const -> bool { return type() == kind::boolean; }
  [[nodiscard]] auto is_int() const -> bool { return type() == kind::integer; }
  [[nodiscard]] auto is_real() const -> bool { return type() == kind::real; }
  /// int, float or bool (Python's numbers.Number).
  [[nodiscard]] auto is_number() const -> bool { return is_int() || is_real() || is_bool(); }
  [[nodiscard]] auto is_string() const -> bool { return type() == kind::string; }
  [[nodiscard]] auto is_array() const -> bool { return type() == kind::array; }
  [[nodiscard]] auto is_tuple() const -> bool { return tuple_; }
  [[nodiscard]] auto is_object() const -> bool { return type() == kind::object; }
  [[nodiscard]] auto is_function() const -> bool { return type() == kind::function; }
  [[nodiscard]] auto is_lazy() const -> bool { return type() == kind::lazy; }

  // The accessors throw render_error when the value is of another kind.
  [[nodiscard]] auto as_bool() const -> bool { return get<bool>("a bool"); }
  /// An int or bool as an integer.
  [[nodiscard]] auto as_int() const -> std::int64_t;
  /// Any number as a double.
  [[nodiscard]] auto as_real() const -> double;
  [[nodiscard]] auto str() const -> const std::string& { return get<std::string>("a string"); }
  [[nodiscard]] auto arr() const -> const array& { return *get<std::shared_ptr<const array>>("a list"); }
  [[nodiscard]] auto obj() const -> const object& { return *get<std::shared_ptr<object>>("a dict"); }
  /// The shared object itself (a namespace's, for `set ns.x`).
  [[nodiscard]] auto obj_ptr() const -> const std::shared_ptr<object>& { return get<std::shared_ptr<object>>("a dict"); }
  [[nodiscard]] auto fn() const -> const function& { return *get<std::shared_ptr<const function>>("a callable"); }
  [[nodiscard]] auto lazy() const -> const sequence& { return *get<std::shared_ptr<const sequence>>("a sequence"); }

  /// Python's bool(x); Undefined is false.
  [[nodiscard]] auto truthy() const -> bool;

private:
  template <class T>
  auto get(const char* what) const -> const T& {
    if (const auto* p = std::get_if<T>(&v_)) return *p;
    throw render_error(std::string("expected ") + what);
  }

  std::variant<std::monostate, std::nullptr_t, bool, std::int64_t, double, std::string,
               std::shared_ptr<const array>, std::shared_ptr<object>, std::shared_ptr<const function>,
               std::shared_ptr<const sequence>>
      v_;
  bool tuple_ = false;
};

/// Python's ==, deep (1 == 1.0 == True; dicts regardless of order); Undefined
/// equals only Undefined.
auto equals(const value& a, const value& b) -> bool;
/// Python's str(x) (Undefined is ""); throws render_error for a callable.
auto to_str(const value& v) -> std::string;
/// Python's repr(x).
auto to_repr(const value& v) -> std::string;
/// Python's repr of a float: "1.0", "1e-05", "1.2345678901234568e+17", "nan".
auto format_real(double d) -> std::string;
/// Python's repr of a str: single quotes unless it holds ' and no ".
auto repr_string(std::string_view s) -> std::string;

/// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers'
/// tojson calls it; indent < 0 is None. Throws render_error for a value JSON
/// cannot hold (Undefined, a callable).
struct json_options {
  int indent = -1;
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator = ", "; ///< "," when an indent is given
  std::string key_separator = ": ";
};
auto to_json(const value& v, const json_options& options) -> std::string;

/// The value of a JSON text (objects keep their key order); throws
/// render_error("<what>: <problem>") on malformed JSON.
auto parse_json(std::string_view text, std::string_view what) -> value;

} // namespace troupe::jinja
