#include "service/http/tool_fields.hpp"
#include "base/json_text.hpp"

#include <algorithm>
#include <optional>
#include <set>

namespace troupe::api::tool_fields {

using namespace json_reader;

namespace {

// A tools array's own text; the array is reset for its items after.
auto array_text(od::array& items, std::string_view key, std::string& out) -> problem {
  std::string_view raw;
  if (items.raw_json().get(raw) != simdjson::SUCCESS) return error("invalid_type", std::string(key), "tools must be an array");
  out.assign(raw);
  if (auto e = items.reset().error()) return failed(e, key, key, "an array of tools");
  return {};
}

} // namespace

auto read_tools(od::value& v, std::string_view key, std::string& raw_out, std::vector<tool_spec>* specs) -> problem {
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, key, key, "an array of tools");
  if (auto p = array_text(items, key, raw_out)) return p;
  std::size_t i = 0;
  std::set<std::string> names;
  for (auto item : items) {
    const auto where = std::string(key) + "[" + std::to_string(i++) + "]";
    od::object tool;
    if (auto e = item.get_object().get(tool)) return failed(e, where, where, "an object");
    std::string type;
    tool_spec spec;
    bool has_function = false;
    if (auto p = for_each_field(tool, [&](std::string_view k, od::value& x) -> problem {
          if (k == "type") return read_string(x, where + ".type", where + ".type", type);
          if (k != "function") return check_json(x, 1);
          has_function = true;
          od::object fn;
          if (auto e = x.get_object().get(fn)) return failed(e, where + ".function", where + ".function", "an object");
          return for_each_field(fn, [&](std::string_view fk, od::value& y) -> problem {
            const auto at = where + ".function." + std::string(fk);
            if (fk == "name") return read_string(y, at, at, spec.name);
            if (fk == "parameters") return read_raw_object(y, at, at, spec.parameters);
            return check_json(y, 1); // description, strict, ...
          });
        }))
      return p;
    if (type != "function")
      return error("invalid_value", where + ".type",
                   where + ".type must be \"function\"" + (type.empty() ? std::string() : ", got \"" + type + "\""));
    if (!has_function || spec.name.empty())
      return error("missing_field", where + ".function.name", where + ".function.name is missing");
    if (!names.insert(spec.name).second)
      return error("invalid_value", where + ".function.name", "two tools are named \"" + spec.name + "\"");
    if (specs) specs->push_back(std::move(spec));
  }
  return {};
}

namespace {

struct flat_reader {
  const flat_tool_shape& shape;
  std::vector<tool_spec>& specs;
  flat_tools& out;
  std::set<std::string> names;

  auto items(od::array& items, const std::string& path, std::string_view prefix) -> problem {
    std::size_t i = 0;
    for (auto item : items) {
      const auto at = path + "[" + std::to_string(i++) + "]";
      od::object t;
      if (auto e = item.get_object().get(t)) return failed(e, at, at, "a tool");
      if (auto p = tool(t, at, prefix)) return p;
    }
    return {};
  }

  auto tool(od::object& t, const std::string& at, std::string_view prefix) -> problem {
    tool_spec spec;
    std::string description, type = shape.type_optional ? std::string(shape.type) : std::string();
    bool deferred = false;
    std::optional<od::array> inner;
    if (auto p = for_each_field(t, [&](std::string_view k, od::value& x) -> problem {
          const auto f = at + "." + std::string(k);
          if (k == "type") return read_string(x, f, f, type);
          if (k == "name") return read_string(x, f, f, spec.name);
          if (k == "description") return read_string(x, f, f, description);
          if (k == "defer_loading") return read_bool(x, f, deferred);
          if (k == shape.schema) return read_raw_object(x, f, f, spec.parameters);
          if (k == "tools" && prefix.empty() && &shape == &responses_tools) {
            if (auto e = x.get_array().get(inner.emplace())) return failed(e, f, f, "an array of tools");
            return namespace_tools(*inner, f, spec.name);
          }
          return check_json(x, 1); // strict (the grammar always is), cache_control...
        }))
      return p;
    if (type == "namespace" && inner) {
      if (spec.name.empty()) return error("missing_field", at + ".name", at + ".name is missing");
      out.namespaces.push_back(spec.name);
      return {};
    }
    if (type != shape.type) {
      if (type.empty() || type == "custom" || !prefix.empty())
        return error("invalid_value", at + ".type",
                     at + ".type \"" + type + "\" is not supported; " + std::string(shape.type) + " tools are");
      out.skipped.push_back(type); // a hosted tool: not offered (docs/api.md)
      return {};
    }
    if (spec.name.empty()) return error("missing_field", at + ".name", at + ".name is missing");
    if (shape.schema_required && spec.parameters.empty()) {
      const auto schema_at = at + "." + std::string(shape.schema);
      return error("missing_field", schema_at, schema_at + " is missing");
    }
    if (!prefix.empty()) spec.name = std::string(prefix) + "." + spec.name;
    if (!names.insert(spec.name).second) return error("invalid_value", at + ".name", "two tools are named \"" + spec.name + "\"");
    out.tools.push_back({spec.name,
                         R"({"type":"function","function":{"name":)" + json_text::quoted(spec.name) + R"(,"description":)" +
                             json_text::quoted(description) + R"(,"parameters":)" +
                             (spec.parameters.empty() ? std::string(R"({"type":"object","properties":{}})") : spec.parameters) +
                             "}}",
                         deferred});
    specs.push_back(std::move(spec));
    return {};
  }

  /// A namespace's functions: read after its name (which may come after them).
  auto namespace_tools(od::array& inner, const std::string& at, const std::string& name) -> problem {
    if (name.empty()) return error("missing_field", at, "a namespace tool's name must come before its tools");
    return items(inner, at, name);
  }
};

} // namespace

auto read_flat_tools(od::value& v, const flat_tool_shape& shape, std::vector<tool_spec>& specs, flat_tools& out,
                     std::string* raw) -> problem {
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, "tools", "tools", "an array of tools");
  if (raw)
    if (auto p = array_text(items, "tools", *raw)) return p;
  flat_reader reader{shape, specs, out, {}};
  return reader.items(items, "tools", {});
}

auto chat_tools_json(const std::vector<flat_tool>& tools, const std::vector<std::string>& referenced) -> std::string {
  std::string json = "[";
  for (const auto& t : tools) {
    if (t.deferred && std::find(referenced.begin(), referenced.end(), t.name) == referenced.end()) continue;
    if (json.size() > 1) json += ',';
    json += t.chat_json;
  }
  return json + "]";
}

auto read_tool_choice(od::value& v, tool_choice& out) -> problem {
  constexpr std::string_view key = "tool_choice";
  od::json_type t;
  if (auto e = v.type().get(t)) return bad_json(e);
  if (t == od::json_type::string) {
    std::string s;
    if (auto p = read_string(v, key, key, s)) return p;
    if (s == "none") out.what = tool_choice::mode::none;
    else if (s == "auto") out.what = tool_choice::mode::automatic;
    else if (s == "required") out.what = tool_choice::mode::required;
    else
      return error("invalid_value", std::string(key),
                   "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                   "{\"name\": ...}}, got \"" + s + "\"");
    return {};
  }
  od::object o;
  if (auto e = v.get_object().get(o)) return failed(e, key, key, "a string or an object");
  std::string type;
  if (auto p = for_each_field(o, [&](std::string_view k, od::value& x) -> problem {
        if (k == "type") return read_string(x, key, "tool_choice.type", type);
        if (k != "function") return error("unknown_parameter", std::string(key), "unknown parameter tool_choice." + std::string(k));
        od::object fn;
        if (auto e = x.get_object().get(fn)) return failed(e, key, "tool_choice.function", "an object");
        return for_each_field(fn, [&](std::string_view fk, od::value& y) -> problem {
          if (fk == "name") return read_string(y, key, "tool_choice.function.name", out.name);
          return error("unknown_parameter", std::string(key), "unknown parameter tool_choice.function." + std::string(fk));
        });
      }))
    return p;
  if (type != "function") return error("invalid_value", std::string(key), "tool_choice.type must be \"function\"");
  if (out.name.empty()) return error("missing_field", std::string(key), "tool_choice.function.name is missing");
  out.what = tool_choice::mode::named;
  return {};
}

auto read_tool_calls(od::value& v, const std::string& path, std::string& out) -> problem {
  od::array items;
  if (auto e = v.get_array().get(items)) return failed(e, path, path, "an array of tool calls");
  out = "[";
  std::size_t i = 0;
  for (auto item : items) {
    const auto where = path + "[" + std::to_string(i) + "]";
    od::object call;
    if (auto e = item.get_object().get(call)) return failed(e, where, where, "an object");
    std::string id, type = "function", name, arguments;
    bool has_function = false;
    if (auto p = for_each_field(call, [&](std::string_view k, od::value& x) -> problem {
          if (k == "id") return read_string(x, where + ".id", where + ".id", id);
          if (k == "type") return read_string(x, where + ".type", where + ".type", type);
          if (k != "function") return check_json(x, 1);
          has_function = true;
          od::object fn;
          if (auto e = x.get_object().get(fn)) return failed(e, where + ".function", where + ".function", "an object");
          return for_each_field(fn, [&](std::string_view fk, od::value& y) -> problem {
            const auto at = where + ".function." + std::string(fk);
            if (fk == "name") return read_string(y, at, at, name);
            if (fk == "arguments") return read_string(y, at, at, arguments);
            return check_json(y, 1);
          });
        }))
      return p;
    if (type != "function") return error("invalid_value", where + ".type", where + ".type must be \"function\"");
    if (!has_function || name.empty()) return error("missing_field", where + ".function.name", where + ".function.name is missing");
    out += (i ? "," : "") + tool_call_json(id, name, arguments);
    ++i;
  }
  out += "]";
  if (i == 0) out.clear();
  return {};
}

auto tool_call_json(std::string_view id, std::string_view name, std::string_view arguments) -> std::string {
  // Templates read the arguments as an object (vLLM hands them so too);
  // other text, or an object nested deeper than a request may be, as the
  // string it is.
  const std::string args_json = json_reader::is_json_object(arguments) ? std::string(arguments) : json_text::quoted(arguments);
  return std::string("{\"id\":") + json_text::quoted(id) + ",\"type\":\"function\",\"function\":{\"name\":" +
         json_text::quoted(name) + ",\"arguments\":" + args_json + "}}";
}

} // namespace troupe::api::tool_fields
