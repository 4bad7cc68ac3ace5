#pragma once
// Reading JSON request bodies with simdjson On-Demand, field by field, into
// errors naming the field: the helpers every protocol's parser shares
// (openai/, anthropic/, responses/, websocket/).

#include "base/types.hpp"
#include "engine/core/sampling_params.hpp"
#include "service/request/api_error.hpp"

#include <simdjson.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::api::json_reader {

namespace od = simdjson::ondemand;

// A failed read; the walk stops at the first one.
using problem = std::optional<api_error>;

constexpr std::int64_t int32_min = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();
constexpr int max_json_depth = 64; // far beyond any real request; bounds the recursion

auto error(std::string code, std::string param, std::string message) -> api_error;

auto bad_json(simdjson::error_code e) -> api_error;
/// sampling_params::validate()'s complaint as a 400 (invalid_value), its
/// param the field its line opens with ("top_p must be in (0, 1], got 1.5").
auto check_sampling(const sampling_params& s) -> std::optional<api_error>;

auto bad_type(std::string_view param, std::string_view path, std::string_view expected) -> api_error;

// simdjson reports a value of another JSON type as INCORRECT_TYPE; every other
// error means the text itself is broken.
auto failed(simdjson::error_code e, std::string_view param, std::string_view path,
            std::string_view expected) -> api_error;

auto show(double v) -> std::string;

/// Whether s, trailing whitespace aside, is spelled as a JSON number.
auto is_json_number(std::string_view s) -> bool;

/// Reads a field's value only to check that it is well-formed JSON.
auto check_json(od::value v, int depth) -> problem;

/// True for JSON null (consumed), which every field takes as absent.
auto read_null(od::value& v, bool& is_null) -> problem;

/// Reads a number. On-demand says NUMBER_ERROR, not INCORRECT_TYPE, for a
/// string or a boolean, so the type is checked first; and NUMBER_ERROR too for
/// a well-formed number beyond double or 64 bits (1e400), which is out of range.
auto read_number(od::value& v, std::string_view param, std::string_view path, std::string_view expected,
                 od::number& out) -> problem;

auto read_string(od::value& v, std::string_view param, std::string_view path, std::string& out) -> problem;

auto read_bool(od::value& v, std::string_view param, bool& out) -> problem;

auto read_float(od::value& v, std::string_view param, float& out) -> problem;

/// Whether `raw` is well-formed JSON, an object, nested at most
/// max_json_depth deep.
auto is_json_object(std::string_view raw) -> bool;

/// An object's JSON text, as given (a schema, template variables, a tool's
/// input), checked with is_json_object.
auto read_raw_object(od::value& v, std::string_view param, std::string_view path, std::string& out) -> problem;

/// A text given as a string, or as an array of parts {"type", "text"} (other
/// fields checked as JSON and left) joined: chat's content, Anthropic's text
/// blocks, the Responses API's input_text parts. A part of another type is
/// invalid_value, naming the types taken ("only text content is supported");
/// errors name `param`, messages the part's path.
auto read_text_parts(od::value& v, std::string_view param, const std::string& path,
                     std::initializer_list<std::string_view> types, std::string& out) -> problem;

// The whole range, both ends: "got 2147483648" beside ">= 1" would read as a contradiction.
auto range_text(std::int64_t lo, std::int64_t hi) -> std::string;

/// An integer in [lo, hi]. A whole number written as a float (2.0) counts, as
/// in vLLM's pydantic models; 1.5 is the wrong type.
auto read_int(od::value& v, std::string_view param, std::string_view path, std::int64_t lo,
              std::int64_t hi, std::int64_t& out) -> problem;

/// Token ids: integers in [0, 2^31).
auto read_token_ids(od::array items, std::string_view param, std::string_view path,
                    std::vector<token_id>& out) -> problem;

/// Calls f(key, value) -> problem for each field of `obj` whose value is not
/// null (JSON null counts as absent), stopping at the first problem.
template <class F>
auto for_each_field(od::object& obj, F&& f) -> problem {
  for (auto field_result : obj) {
    od::field field;
    std::string_view key;
    if (auto e = std::move(field_result).get(field)) return bad_json(e);
    if (auto e = field.unescaped_key().get(key)) return bad_json(e);
    bool is_null = false;
    if (auto p = read_null(field.value(), is_null)) return p;
    if (is_null) continue;
    if (auto p = f(key, field.value())) return p;
  }
  return {};
}

template <class Int>
auto read_int(od::value& v, std::string_view param, std::int64_t lo, std::int64_t hi, Int& out) -> problem {
  std::int64_t wide = 0;
  if (auto p = read_int(v, param, param, lo, hi, wide)) return p;
  out = static_cast<Int>(wide);
  return {};
}

// Reads `text` as one JSON object, calling `read(key, value)` for each field
// (JSON null counts as absent); refuses text after the object. `what` names
// it in the errors ("request body", "a message").
template <class F>
auto read_object(std::string_view text, std::string_view what, F&& read) -> problem {
  // One parser per thread: it keeps its buffers between requests.
  thread_local od::parser parser;
  const simdjson::padded_string padded(text);
  od::document doc;
  od::object root;
  if (auto e = parser.iterate(padded).get(doc)) return bad_json(e);
  if (auto e = doc.get_object().get(root)) {
    if (e != simdjson::INCORRECT_TYPE) return bad_json(e);
    return error("invalid_json", "", std::string(what) + " must be a JSON object");
  }
  if (auto p = for_each_field(root, read)) return p;
  // 3.0.1 has no at_end(): anything after the object leaves a location.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS)
    return error("invalid_json", "", std::string(what) + " has text after the JSON object");
  return {};
}

/// A body's top-level "model" when it is a JSON object whose "model" is a
/// string; nullopt otherwise (the parser then says why). A scan, not a
/// parse: the gateway resolves the model first, then parses the body once
/// with that model's generation defaults.
auto peek_model(std::string_view body) -> std::optional<std::string>;

} // namespace troupe::api::json_reader
