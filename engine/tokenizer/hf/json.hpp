#pragma once
// Small readers over simdjson's DOM for tokenizer.json: each throws
// hf_error naming the key, which the loader prefixes with the file.

#include <simdjson.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace troupe::hf {

namespace dom = simdjson::dom;

/// A tokenizer.json the loader cannot use, in one line without the file name.
struct hf_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// `obj[key]`, or nullopt when absent or null.
inline auto field(dom::element obj, std::string_view key) -> std::optional<dom::element> {
  auto value = dom::element{};
  if (obj.at_key(key).get(value) != simdjson::SUCCESS || value.is_null()) return std::nullopt;
  return value;
}

inline auto as_string(dom::element e, std::string_view what) -> std::string_view {
  auto s = std::string_view{};
  if (e.get_string().get(s) != simdjson::SUCCESS) throw hf_error(std::string(what) + " is not a string");
  return s;
}

inline auto string_field(dom::element obj, std::string_view key, std::string_view what) -> std::string_view {
  const auto v = field(obj, key);
  if (!v) throw hf_error(std::string(what) + " has no \"" + std::string(key) + "\"");
  return as_string(*v, std::string(what) + "." + std::string(key));
}

inline auto opt_string(dom::element obj, std::string_view key) -> std::optional<std::string_view> {
  const auto v = field(obj, key);
  if (!v) return std::nullopt;
  return as_string(*v, key);
}

inline auto bool_field(dom::element obj, std::string_view key, bool fallback) -> bool {
  const auto v = field(obj, key);
  if (!v) return fallback;
  auto b = false;
  if (v->get_bool().get(b) != simdjson::SUCCESS) throw hf_error("\"" + std::string(key) + "\" is not a boolean");
  return b;
}

inline auto int_field(dom::element obj, std::string_view key, std::int64_t fallback) -> std::int64_t {
  const auto v = field(obj, key);
  if (!v) return fallback;
  auto i = std::int64_t{0};
  if (v->get_int64().get(i) != simdjson::SUCCESS) {
    auto u = std::uint64_t{0};
    if (v->get_uint64().get(u) != simdjson::SUCCESS) throw hf_error("\"" + std::string(key) + "\" is not an integer");
    i = static_cast<std::int64_t>(u);
  }
  return i;
}

/// `obj["type"]`, for messages like `pre_tokenizer type "Punctuation"`.
inline auto type_of(dom::element obj, std::string_view what) -> std::string_view {
  return string_field(obj, "type", what);
}

[[noreturn]] inline void unsupported(std::string_view what, std::string_view type) {
  throw hf_error(std::string(what) + " type \"" + std::string(type) + "\" is not supported");
}

} // namespace troupe::hf
