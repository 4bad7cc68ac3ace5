#include "engine/template/value.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

namespace troupe::jinja {
namespace {

auto json(std::string_view text) -> value { return parse_json(text, "test"); }

} // namespace

TEST_CASE("value: Python's str and repr") {
  CHECK(to_str(value{}) == "");
  CHECK(to_str(value::none()) == "None");
  CHECK(to_str(true) == "True");
  CHECK(to_str(value(std::int64_t{-42})) == "-42");
  CHECK(to_str(1.0) == "1.0");
  CHECK(to_str(json(R"([1, "a", null, true, 2.5, {"k": "it's"}])")) == R"([1, 'a', None, True, 2.5, {'k': "it's"}])");
  CHECK(to_str(value::tuple({value("a"), value(1)})) == "('a', 1)");
  CHECK(to_str(value::tuple({value("a")})) == "('a',)");
  CHECK(repr_string("a\nb\\c\x01") == R"('a\nb\\c\x01')");
  CHECK(repr_string("both ' and \"") == R"('both \' and "')");
  CHECK(repr_string("é😀") == "'é😀'");
}

TEST_CASE("value: floats print as Python's repr") {
  CHECK(format_real(0.1 + 0.2) == "0.30000000000000004");
  CHECK(format_real(1e16) == "1e+16");
  CHECK(format_real(1.5e16) == "1.5e+16");
  CHECK(format_real(123456789012345678.0) == "1.2345678901234568e+17");
  CHECK(format_real(1e15) == "1000000000000000.0");
  CHECK(format_real(0.0001) == "0.0001");
  CHECK(format_real(0.00001) == "1e-05");
  CHECK(format_real(-0.0) == "-0.0");
  CHECK(format_real(2.5) == "2.5");
  CHECK(format_real(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(format_real(std::nan("")) == "nan");
}

TEST_CASE("value: truthiness and equality as Python's") {
  CHECK_FALSE(value{}.truthy());
  CHECK_FALSE(value::none().truthy());
  CHECK_FALSE(value("").truthy());
  CHECK_FALSE(value(0.0).truthy());
  CHECK_FALSE(json("[]").truthy());
  CHECK_FALSE(json("{}").truthy());
  CHECK(value("0").truthy());
  CHECK(equals(value(1), value(1.0)));
  CHECK(equals(value(true), value(1)));
  CHECK_FALSE(equals(value("1"), value(1)));
  CHECK(equals(json(R"({"a": 1, "b": [1, 2]})"), json(R"({"b": [1, 2.0], "a": true})")));
  CHECK_FALSE(equals(json(R"({"a": 1})"), json(R"({"a": 1, "b": 2})")));
  CHECK(equals(value{}, value{}));
  CHECK_FALSE(equals(value{}, value::none()));
}

TEST_CASE("value: json.dumps as transformers' tojson calls it") {
  const auto v = json(R"({"name": "f", "n": [1, 2.0, -3e-7], "s": "é \"q\" \\ \n\t\u0001", "e": {}, "l": [], "z": null})");
  CHECK(to_json(v, {}) == R"({"name": "f", "n": [1, 2.0, -3e-07], "s": "é \"q\" \\ \n\t\u0001", "e": {}, "l": [], "z": null})");
  json_options indented;
  indented.indent = 2;
  indented.item_separator = ",";
  CHECK(to_json(json(R"({"a": [1, {"b": 2}], "c": []})"), indented) ==
        "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"c\": []\n}");
  json_options ascii;
  ascii.ensure_ascii = true;
  CHECK(to_json(value("é😀"), ascii) == R"("\u00e9\ud83d\ude00")");
  json_options sorted;
  sorted.sort_keys = true;
  CHECK(to_json(json(R"({"b": 1, "a": 2})"), sorted) == R"({"a": 2, "b": 1})");
  CHECK_THROWS_AS(to_json(value{}, {}), render_error);
}

TEST_CASE("value: JSON input keeps key order, surrogate pairs, big numbers") {
  const auto v = json(R"({"z": 1, "a": 2, "m": "\ud83d\ude00", "big": 1000000000000000019884624838656, "z": 3})");
  REQUIRE(v.is_object());
  CHECK(v.obj().entries[0].first == "z");
  CHECK(v.obj().entries[0].second.as_int() == 3); // a repeated key: its first place, its last value
  CHECK(v.obj().entries[1].first == "a");
  CHECK(v.obj().find("m")->str() == "😀");
  CHECK(v.obj().find("big")->is_real());
  CHECK_THROWS_AS(json("{\"a\": }"), render_error);
  CHECK_THROWS_AS(json("[1] x"), render_error);
  CHECK_THROWS_AS(json("\"\x01\""), render_error);
}

TEST_CASE("value: accessors of the wrong kind throw render_error") {
  CHECK_THROWS_AS((void)value("s").as_int(), render_error);
  CHECK_THROWS_AS((void)value(1).str(), render_error);
  CHECK_THROWS_AS((void)value::none().arr(), render_error);
  CHECK(value(true).as_int() == 1);
  CHECK(value(2).as_real() == 2.0);
}

} // namespace troupe::jinja
