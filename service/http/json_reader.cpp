// The shared JSON readers of json_reader.hpp.
#include "service/http/json_reader.hpp"

#include <algorithm>

#include "base/json_text.hpp"

#include <cfloat>
#include <cmath>
#include <cstdio>

namespace troupe::api::json_reader {

auto error(std::string code, std::string param, std::string message) -> api_error {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

auto check_sampling(const sampling_params& s) -> std::optional<api_error> {
  auto line = s.validate();
  if (line.empty()) return std::nullopt;
  auto param = line.substr(0, line.find_first_of(" ["));
  return error("invalid_value", std::move(param), std::move(line));
}

auto bad_json(simdjson::error_code e) -> api_error {
  return error("invalid_json", "",
               std::string("request body is not valid JSON (") + simdjson::error_message(e) + ")");
}

auto bad_type(std::string_view param, std::string_view path, std::string_view expected) -> api_error {
  return error("invalid_type", std::string(param), std::string(path) + " must be " + std::string(expected));
}

auto failed(simdjson::error_code e, std::string_view param, std::string_view path,
            std::string_view expected) -> api_error {
  return e == simdjson::INCORRECT_TYPE ? bad_type(param, path, expected) : bad_json(e);
}

auto show(double v) -> std::string { return json_text::show_number(v); }

auto is_json_number(std::string_view s) -> bool {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  std::size_t i = 0;
  const auto at = [&](char c) { return i < s.size() && s[i] == c; };
  const auto digits = [&] {
    const auto start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (at('-')) ++i;
  if (at('0')) ++i;
  else if (!digits()) return false;
  if (at('.')) {
    ++i;
    if (!digits()) return false;
  }
  if (at('e') || at('E')) {
    ++i;
    if (at('+') || at('-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

auto check_json(od::value v, int depth) -> problem {
  if (depth > max_json_depth) return error("invalid_json", "", "request body is nested too deeply");
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  simdjson::error_code e = simdjson::SUCCESS;
  switch (t) {
    case od::json_type::object:
      for (auto f : v.get_object()) {
        od::field field;
        std::string_view key;
        if ((e = std::move(f).get(field)) || (e = field.unescaped_key().get(key))) break;
        if (auto p = check_json(field.value(), depth + 1)) return p;
      }
      break;
    case od::json_type::array:
      for (auto item : v.get_array()) {
        od::value element;
        if ((e = item.get(element))) break;
        if (auto p = check_json(element, depth + 1)) return p;
      }
      break;
    case od::json_type::string: e = v.get_string().error(); break;
    case od::json_type::number:
      // A well-formed number too large for simdjson (1e400) is still JSON.
      e = v.get_number().error();
      if (e == simdjson::NUMBER_ERROR && is_json_number(v.raw_json_token())) e = simdjson::SUCCESS;
      break;
    case od::json_type::boolean: e = v.get_bool().error(); break;
    case od::json_type::null: {
      bool is_null = false;
      e = v.is_null().get(is_null);
      if (!e && !is_null) e = simdjson::N_ATOM_ERROR;
      break;
    }
  }
  if (e) return bad_json(e);
  return {};
}

auto read_null(od::value& v, bool& is_null) -> problem {
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  is_null = t == od::json_type::null;
  if (is_null) return check_json(v, 0);
  return {};
}

auto read_number(od::value& v, std::string_view param, std::string_view path, std::string_view expected,
                 od::number& out) -> problem {
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t != od::json_type::number) return bad_type(param, path, expected);
  if (auto e = v.get_number().get(out)) {
    if (e == simdjson::NUMBER_ERROR && is_json_number(v.raw_json_token()))
      return error("invalid_value", std::string(param), std::string(path) + " is out of range");
    return bad_json(e);
  }
  return {};
}

auto read_string(od::value& v, std::string_view param, std::string_view path, std::string& out) -> problem {
  std::string_view s;
  if (auto e = v.get_string().get(s)) return failed(e, param, path, "a string");
  out.assign(s);
  return {};
}

auto read_bool(od::value& v, std::string_view param, bool& out) -> problem {
  if (auto e = v.get_bool().get(out)) return failed(e, param, param, "a boolean");
  return {};
}

auto read_float(od::value& v, std::string_view param, float& out) -> problem {
  od::number n;
  if (auto p = read_number(v, param, param, "a number", n)) return p;
  // Out of float's range is inf (a plain cast would be undefined); validate() rejects it.
  const double d = n.as_double();
  out = d > FLT_MAX    ? std::numeric_limits<float>::infinity()
        : d < -FLT_MAX ? -std::numeric_limits<float>::infinity()
                       : static_cast<float>(d);
  return {};
}

auto range_text(std::int64_t lo, std::int64_t hi) -> std::string {
  return "between " + std::to_string(lo) + " and " + std::to_string(hi);
}

auto read_int(od::value& v, std::string_view param, std::string_view path, std::int64_t lo,
              std::int64_t hi, std::int64_t& out) -> problem {
  od::number n;
  if (auto p = read_number(v, param, path, "an integer", n)) return p;
  const auto out_of_range = [&](const std::string& got) {
    return error("invalid_value", std::string(param),
                 std::string(path) + " must be " + range_text(lo, hi) + ", got " + got);
  };
  switch (n.get_number_type()) {
    case od::number_type::signed_integer: out = n.get_int64(); break;
    case od::number_type::unsigned_integer: return out_of_range(std::to_string(n.get_uint64()));
    case od::number_type::floating_point_number: {
      const double d = n.get_double();
      if (d != std::trunc(d)) return bad_type(param, path, "an integer");
      if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi))) return out_of_range(show(d));
      out = static_cast<std::int64_t>(d);
      break;
    }
  }
  if (out < lo || out > hi) return out_of_range(std::to_string(out));
  return {};
}

auto read_token_ids(od::array items, std::string_view param, std::string_view path,
                    std::vector<token_id>& out) -> problem {
  for (auto item : items) {
    const std::string element_path = std::string(path) + "[" + std::to_string(out.size()) + "]";
    od::value element;
    std::int64_t id = 0;
    if (auto e = item.get(element)) return bad_json(e);
    if (auto p = read_int(element, param, element_path, 0, int32_max, id)) return p;
    out.push_back(static_cast<token_id>(id));
  }
  return {};
}

auto peek_model(std::string_view body) -> std::optional<std::string> {
  thread_local od::parser parser;
  const simdjson::padded_string padded(body);
  od::document doc;
  od::object root;
  std::string_view model;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(root) || root.find_field_unordered("model").get(model))
    return std::nullopt;
  return std::string(model);
}

auto is_json_object(std::string_view raw) -> bool {
  thread_local simdjson::dom::parser parser;
  if (parser.max_depth() != max_json_depth && parser.allocate(4096, max_json_depth)) return false;
  const simdjson::padded_string padded(raw);
  auto parsed = parser.parse(padded);
  return !parsed.error() && parsed.value().is_object();
}

auto read_raw_object(od::value& v, std::string_view param, std::string_view path, std::string& out) -> problem {
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, param, path, "an object");
  std::string_view raw;
  if (auto e = o.raw_json().get(raw)) return failed(e, param, path, "an object");
  // (On-demand skips an object's raw text by its brackets alone.)
  if (!is_json_object(raw))
    return error("invalid_json", std::string(param),
                 std::string(path) + " is not valid JSON, or is nested more than " + std::to_string(max_json_depth) +
                     " deep");
  out.assign(raw);
  return {};
}

auto read_text_parts(od::value& v, std::string_view param, const std::string& path,
                     std::initializer_list<std::string_view> types, std::string& out) -> problem {
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t == od::json_type::string) return read_string(v, param, path, out);
  od::array parts;
  if (auto e = v.get_array().get(parts)) return failed(e, param, path, "a string or an array of text parts");
  int i = 0;
  for (auto part_result : parts) {
    const std::string at = path + "[" + std::to_string(i++) + "]";
    od::object part;
    if (auto e = part_result.get_object().get(part)) return failed(e, param, at, "an object");
    std::string type, text;
    bool has_text = false;
    if (auto p = for_each_field(part, [&](std::string_view key, od::value& x) -> problem {
          if (key == "type") return read_string(x, param, at + ".type", type);
          if (key != "text") return check_json(x, 1);
          has_text = true;
          return read_string(x, param, at + ".text", text);
        }))
      return p;
    if (std::find(types.begin(), types.end(), type) == types.end()) {
      std::string names;
      for (const auto name : types) names += (names.empty() ? "\"" : " or \"") + std::string(name) + "\"";
      return error("invalid_value", std::string(param),
                   at + ".type must be " + names + ", got \"" + type + "\" (only text content is supported)");
    }
    if (!has_text) return error("missing_field", std::string(param), at + ".text is missing");
    out += text;
  }
  return {};
}

} // namespace troupe::api::json_reader
