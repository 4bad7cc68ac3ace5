#include "service/http/websocket/websocket_api.hpp"

#include "base/json_text.hpp"
#include "service/http/json_reader.hpp"
#include "service/http/openai/openai_api.hpp"
#include "service/http/openai/openai_format.hpp"

#include <simdjson.h>

namespace troupe::api {

using namespace json_reader;

auto parse_ws_envelope(std::string_view text) -> std::variant<ws_envelope, api_error> {
  ws_envelope env;
  if (auto p = read_object(text, "a message", [&](std::string_view key, od::value& v) -> problem {
        if (key == "type") return read_string(v, key, key, env.type);
        if (key == "api_key") return read_string(v, key, key, env.api_key);
        if (key != "id") return check_json(v, 1);
        od::json_type t;
        if (auto e = v.type().get(t)) return bad_json(e);
        if (t == od::json_type::string) {
          std::string id;
          if (auto p = read_string(v, key, key, id)) return p;
          env.id_json = json_text::quoted(id);
          return {};
        }
        std::int64_t n = 0;
        if (t != od::json_type::number || v.get_int64().get(n)) return bad_type(key, key, "a string or an integer");
        env.id_json = std::to_string(n);
        return {};
      }))
    return *p;
  if (env.type.empty()) env.type = "chat";
  if (env.type != "chat" && env.type != "cancel" && env.type != "ping" && env.type != "auth")
    return error("invalid_value", "type", "type must be \"chat\", \"cancel\", \"ping\" or \"auth\", got \"" + env.type + "\"");
  return env;
}

auto ws_error_event(std::string_view id_json, int status, std::string_view error_body, std::string_view more)
    -> std::string {
  std::string out = R"({"type":"error","id":)";
  out += id_json.empty() ? std::string_view("null") : id_json;
  out += R"(,"status":)" + std::to_string(status) + ",";
  if (!more.empty()) {
    out += more;
    out += ',';
  }
  out += error_body.substr(1); // {"error":{...}} → ..."error":{...}}
  return out;
}

auto websocket_protocol::parse(std::string_view body, const sampling_params& defaults)
    -> std::variant<generation_request, api_error> {
  auto parsed = parse_request(endpoint::chat, body, defaults, true);
  if (auto* r = std::get_if<generation_request>(&parsed)) { // (its events are the stream)
    r->stream = true;
    r->include_usage = false;
  }
  return parsed;
}

auto websocket_protocol::error_body(const api_error& e) const -> std::string { return api::error_body(e); }

auto websocket_protocol::response_id(const generation_request&, const std::string& request_id) const
    -> std::string {
  return "chatcmpl-" + request_id;
}

auto websocket_protocol::encoder(const generation_request&, response_head head) const
    -> std::unique_ptr<wire_encoder> {
  return std::make_unique<websocket_encoder>(id_json_, std::move(head));
}

auto websocket_encoder::event(std::string_view type) const -> std::string {
  return R"({"type":")" + std::string(type) + R"(","id":)" + id_json_;
}

auto websocket_encoder::opening(const usage&) -> std::string {
  return event("start") + R"(,"model":)" + json_text::quoted(head_.model) + "}\n";
}

void websocket_encoder::write(std::string& batch, std::span<const output_event> events, std::int64_t tokens) {
  const auto n = R"(,"n":)" + std::to_string(tokens);
  for (const auto& e : events) {
    switch (e.what) {
    case output_event::kind::text:
      if (!e.text.empty()) batch += event("token") + n + R"(,"text":)" + json_text::quoted(e.text) + "}\n";
      break;
    case output_event::kind::reasoning:
      batch += event("reasoning") + n + R"(,"text":)" + json_text::quoted(e.text) + "}\n";
      break;
    case output_event::kind::call_start:
    case output_event::kind::call_arguments:
      batch += event("tool_call") + n + R"(,"index":)" + std::to_string(e.call) +
               (e.call_id.empty() ? std::string()
                                  : R"(,"call_id":)" + json_text::quoted(e.call_id) + R"(,"name":)" + json_text::quoted(e.name)) +
               R"(,"arguments":)" + json_text::quoted(e.text) + "}\n";
      break;
    }
  }
}

auto websocket_encoder::closing(std::string batch, const output_finish& f, const usage& u, bool) -> std::string {
  batch += event("done") + R"(,"model":)" + json_text::quoted(head_.model) + R"(,"finish_reason":")" +
           std::string(f.reason) + R"(","usage":{"prompt_tokens":)" + std::to_string(u.prompt_tokens) +
           R"(,"completion_tokens":)" + std::to_string(u.completion_tokens) + R"(,"total_tokens":)" +
           std::to_string(u.prompt_tokens + u.completion_tokens) + "}}\n";
  return batch;
}

auto websocket_encoder::error_closing(const api_error& e) -> std::string {
  return ws_error_event(id_json_, e.status, api::error_body(e)) + "\n";
}

} // namespace troupe::api
