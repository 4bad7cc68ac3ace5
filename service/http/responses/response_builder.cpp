#include "service/http/responses/response_builder.hpp"

#include "base/json_text.hpp"
#include "service/http/tool_fields.hpp"

namespace troupe::api::responses {

namespace {

auto number(float v) -> std::string {
  std::string out;
  json_text::append_number(out, v);
  return out;
}

} // namespace

response_builder::response_builder(const generation_request& body, const responses_fields& fields, response_head head,
                                   bool stream)
  : head_(std::move(head)),
    echo_(fields),
    max_output_tokens_(body.max_tokens.value_or(0)),
    temperature_(body.sampling.temperature),
    top_p_(body.sampling.top_p),
    parallel_tool_calls_(body.parallel_tool_calls),
    user_(body.user),
    stream_(stream) {}

void response_builder::event(std::string& out, std::string_view type, std::string body) {
  // Every event: {"type", "sequence_number", ...its fields}.
  out += "event: ";
  out += type;
  out += "\ndata: {\"type\":\"";
  out += type;
  out += "\",\"sequence_number\":" + std::to_string(sequence_++);
  if (!body.empty()) out += ',';
  out += body;
  out += "}\n\n";
}

auto response_builder::called(std::string_view name) const -> std::string {
  // A namespace tool's function, "ns.f" to the model: {"namespace": "ns", "name": "f"}.
  for (const auto& ns : echo_.namespaces)
    if (name.size() > ns.size() + 1 && name.starts_with(ns) && name[ns.size()] == '.')
      return R"(,"namespace":)" + json_text::quoted(ns) + R"(,"name":)" + json_text::quoted(name.substr(ns.size() + 1));
  return R"(,"name":)" + json_text::quoted(name);
}

auto response_builder::item_json(const item& it, bool complete) const -> std::string {
  const std::string status = it.done ? (complete ? "completed" : "incomplete") : "in_progress";
  std::string out = R"({"id":)" + json_text::quoted(it.id);
  switch (it.what) {
  case item::kind::reasoning:
    // troupe has no summarizer: a summary asked for is the reasoning itself.
    out += R"(,"type":"reasoning","summary":[)";
    if (it.done && !echo_.reasoning_summary.empty())
      out += R"({"type":"summary_text","text":)" + json_text::quoted(it.text) + "}";
    out += R"(],"content":[)";
    if (it.done) out += R"({"type":"reasoning_text","text":)" + json_text::quoted(it.text) + "}";
    out += "]";
    if (it.done && echo_.include_encrypted && seal_) out += R"(,"encrypted_content":)" + json_text::quoted(seal_->seal(it.text));
    break;
  case item::kind::message:
    out += R"(,"type":"message","status":")" + status + R"(","role":"assistant","content":[)";
    if (it.done || !it.text.empty())
      out += R"({"type":"output_text","text":)" + json_text::quoted(it.text) + R"(,"annotations":[],"logprobs":[]})";
    out += "]";
    break;
  case item::kind::function_call:
    out += R"(,"type":"function_call","status":")" + status + R"(","call_id":)" + json_text::quoted(it.call_id) +
           called(it.name) + R"(,"arguments":)" + json_text::quoted(it.text);
    break;
  }
  return out + "}";
}

auto response_builder::response_json(std::string_view status, std::string_view finish_reason, const usage* u,
                                     bool complete) const -> std::string {
  std::string out = R"({"id":)" + json_text::quoted(head_.id) + R"(,"object":"response","created_at":)" +
                    std::to_string(head_.created) + R"(,"status":")" + std::string(status) + R"(","error":null)";
  out += R"(,"incomplete_details":)";
  out += finish_reason == "length" ? R"({"reason":"max_output_tokens"})" : "null";
  out += R"(,"instructions":)" + (echo_.has_instructions ? json_text::quoted(echo_.instructions) : std::string("null"));
  out += R"(,"max_output_tokens":)" + (max_output_tokens_ > 0 ? std::to_string(max_output_tokens_) : std::string("null"));
  out += R"(,"model":)" + json_text::quoted(head_.model) + R"(,"output":[)";
  for (std::size_t i = 0; i < items_.size(); ++i) out += (i ? "," : "") + item_json(items_[i], complete);
  out += R"(],"parallel_tool_calls":)" + std::string(parallel_tool_calls_ ? "true" : "false");
  out += R"(,"previous_response_id":)" +
         (echo_.previous_response_id.empty() ? std::string("null") : json_text::quoted(echo_.previous_response_id));
  out += R"(,"reasoning":{"effort":)" +
         (echo_.reasoning_effort.empty() ? std::string("null") : json_text::quoted(echo_.reasoning_effort)) +
         R"(,"summary":)" + (echo_.reasoning_summary.empty() ? std::string("null") : json_text::quoted(echo_.reasoning_summary)) +
         R"(},"store":)" + (echo_.store ? "true" : "false");
  out += R"(,"temperature":)" + number(temperature_) + R"(,"text":{"format":)" + echo_.format_json + "}";
  out += R"(,"tool_choice":)" + echo_.tool_choice_json + R"(,"tools":)" + echo_.tools_json;
  out += R"(,"top_p":)" + number(top_p_) + R"(,"truncation":"disabled","usage":)";
  if (u) {
    std::int64_t reasoning_tokens = 0; // (not counted apart: the text is split, not the tokens)
    out += R"({"input_tokens":)" + std::to_string(u->prompt_tokens) +
           R"(,"input_tokens_details":{"cached_tokens":)" + std::to_string(u->cached_tokens) + R"(},"output_tokens":)" + std::to_string(u->completion_tokens) +
           R"(,"output_tokens_details":{"reasoning_tokens":)" + std::to_string(reasoning_tokens) +
           R"(},"total_tokens":)" + std::to_string(u->prompt_tokens + u->completion_tokens) + "}";
  } else {
    out += "null";
  }
  out += R"(,"user":)" + (user_.empty() ? std::string("null") : json_text::quoted(user_));
  out += R"(,"metadata":)" + echo_.metadata_json + "}";
  return out;
}

auto response_builder::opening(const usage&) -> std::string {
  std::string out;
  if (!stream_) return out;
  const auto r = response_json("in_progress", "", nullptr, true);
  event(out, "response.created", R"("response":)" + r);
  event(out, "response.in_progress", R"("response":)" + r);
  return out;
}

auto response_builder::open(std::string& batch, item::kind k, std::string_view call_id, std::string_view name)
    -> item& {
  const bool call = k == item::kind::function_call; // (a call is always a new item)
  if (!call && !items_.empty() && !items_.back().done && items_.back().what == k) return items_.back();
  close(batch, true);
  static constexpr const char* prefix[] = {"rs_", "msg_", "fc_"};
  items_.push_back({k, prefix[static_cast<int>(k)] + head_.id.substr(head_.id.find('_') + 1) + "_" +
                         std::to_string(items_.size()),
                     "", std::string(call_id), std::string(name)});
  if (!stream_) return items_.back();
  const auto index = std::to_string(items_.size() - 1);
  event(batch, "response.output_item.added", R"("output_index":)" + index + R"(,"item":)" + item_json(items_.back(), true));
  if (k != item::kind::function_call)
    event(batch, "response.content_part.added",
          R"("item_id":)" + json_text::quoted(items_.back().id) + R"(,"output_index":)" + index + R"(,"content_index":0,"part":)" +
              (k == item::kind::message ? R"({"type":"output_text","text":"","annotations":[],"logprobs":[]})"
                                        : R"({"type":"reasoning_text","text":""})"));
  return items_.back();
}

void response_builder::close(std::string& batch, bool complete) {
  if (items_.empty() || items_.back().done) return;
  auto& it = items_.back();
  it.done = true;
  if (!stream_) return;
  const auto index = std::to_string(items_.size() - 1);
  const auto where = R"("item_id":)" + json_text::quoted(it.id) + R"(,"output_index":)" + index;
  switch (it.what) {
  case item::kind::reasoning:
    event(batch, "response.reasoning_text.done", where + R"(,"content_index":0,"text":)" + json_text::quoted(it.text));
    event(batch, "response.content_part.done",
          where + R"(,"content_index":0,"part":{"type":"reasoning_text","text":)" + json_text::quoted(it.text) + "}");
    break;
  case item::kind::message:
    event(batch, "response.output_text.done",
          where + R"(,"content_index":0,"text":)" + json_text::quoted(it.text) + R"(,"logprobs":[])");
    event(batch, "response.content_part.done",
          where + R"(,"content_index":0,"part":{"type":"output_text","text":)" + json_text::quoted(it.text) +
              R"(,"annotations":[],"logprobs":[]})");
    break;
  case item::kind::function_call:
    event(batch, "response.function_call_arguments.done",
          where + called(it.name) + R"(,"arguments":)" + json_text::quoted(it.text));
    break;
  }
  event(batch, "response.output_item.done", R"("output_index":)" + index + R"(,"item":)" + item_json(it, complete));
}

void response_builder::append(std::string& batch, item::kind k, std::string_view text) {
  if (text.empty()) return;
  auto& it = open(batch, k);
  it.text += text;
  if (!stream_) return;
  const bool message = k == item::kind::message;
  event(batch, message ? "response.output_text.delta" : "response.reasoning_text.delta",
        R"("item_id":)" + json_text::quoted(it.id) + R"(,"output_index":)" + std::to_string(items_.size() - 1) +
            R"(,"content_index":0,"delta":)" + json_text::quoted(text) + (message ? R"(,"logprobs":[])" : ""));
}

void response_builder::calls(std::string& batch, const std::vector<tools::call_delta>& calls) {
  for (const auto& c : calls) {
    if (!c.id.empty()) open(batch, item::kind::function_call, c.id, c.name); // a new call
    if (c.arguments.empty() || items_.empty() || items_.back().what != item::kind::function_call) continue;
    auto& it = items_.back();
    it.text += c.arguments;
    if (stream_)
      event(batch, "response.function_call_arguments.delta",
            R"("item_id":)" + json_text::quoted(it.id) + R"(,"output_index":)" + std::to_string(items_.size() - 1) +
                R"(,"delta":)" + json_text::quoted(c.arguments));
  }
}

void response_builder::write(std::string& batch, std::span<const output_event> events, std::int64_t) {
  for (const auto& e : events) {
    if (e.what == output_event::kind::text) append(batch, item::kind::message, e.text);
    else if (e.what == output_event::kind::reasoning) append(batch, item::kind::reasoning, e.text);
  }
  if (auto deltas = call_deltas(events); !deltas.empty()) calls(batch, deltas);
}

auto response_builder::closing(std::string batch, const output_finish& f, const usage& u, bool) -> std::string {
  const auto finish_reason = f.reason;
  const bool complete = finish_reason != "length";
  if (items_.empty()) open(batch, item::kind::message); // (an empty answer: one empty message)
  close(batch, complete);
  final_json_ = response_json(complete ? "completed" : "incomplete", finish_reason, &u, complete);
  event(batch, complete ? "response.completed" : "response.incomplete", R"("response":)" + final_json_);
  return batch;
}

auto response_builder::whole(const output_finish& f, const usage& u) -> std::string {
  (void)closing({}, f, u, true); // (no events when not streamed)
  return final_json_;
}

auto response_builder::error_closing(const api_error& e) -> std::string {
  std::string out;
  event(out, "error",
        R"("code":)" + (e.code.empty() ? std::string("null") : json_text::quoted(e.code)) + R"(,"message":)" +
            json_text::quoted(e.message) + R"(,"param":)" + (e.param.empty() ? std::string("null") : json_text::quoted(e.param)));
  return out;
}

auto response_builder::answer() const -> chat_message {
  chat_message m{"assistant", ""};
  std::string calls;
  for (const auto& it : items_) {
    if (it.what == item::kind::reasoning) m.reasoning_content += it.text;
    else if (it.what == item::kind::message) m.content += it.text;
    else calls += (calls.empty() ? "[" : ",") + tool_fields::tool_call_json(it.call_id, it.name, it.text);
  }
  if (!calls.empty()) {
    m.tool_calls_json = calls + "]";
    m.null_content = m.content.empty();
  }
  return m;
}

auto response_builder::stored() const -> std::optional<std::pair<chat_message, std::string>> {
  return std::pair{answer(), final_json_};
}

} // namespace troupe::api::responses
