#include "service/http/stream_writer.hpp"

#include "engine/tokenizer/utf8.hpp"

namespace troupe {

stream_writer::stream_writer(const api::completion_request& body, std::string ws_id, api::response_head head)
  : kind_(body.kind),
    stream_(body.stream),
    include_usage_(body.include_usage),
    ws_id_(std::move(ws_id)),
    head_(std::move(head)),
    want_logprobs_(body.want_logprobs) {}

void stream_writer::event(std::string& out, std::string_view json) const {
  if (websocket()) {
    out += json;
    out += '\n';
    return;
  }
  out += "data: ";
  out += json;
  out += "\n\n";
}

auto stream_writer::ws_event(std::string_view type) const -> std::string {
  return R"({"type":")" + std::string(type) + R"(","id":)" + ws_id_;
}

auto stream_writer::opening() const -> std::string {
  if (websocket()) return ws_event("start") + R"(,"model":)" + api::json_string(head_.model) + "}\n";
  std::string first;
  if (kind_ == api::endpoint::chat) event(first, api::stream_chunk(kind_, head_, "", "", nullptr, 0, true, include_usage_));
  return first;
}

void stream_writer::add_text(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs) {
  // OpenAI's text_offset counts code points, not bytes. (Settled bytes end
  // on a character boundary: a character settles all its bytes at once.)
  std::int64_t code_points = 0;
  for (const auto& l : logprobs) code_points += num_code_points(l.token);
  if (websocket()) {
    if (!text.empty())
      event(batch, ws_event("token") + R"(,"n":)" + std::to_string(completion_tokens_) + R"(,"text":)" +
                       api::json_string(text) + "}");
  } else if (stream_) {
    if (!text.empty() || !logprobs.empty())
      event(batch, api::stream_chunk(kind_, head_, text, "", logprobs.empty() ? nullptr : &logprobs, text_offset_, false,
                                     include_usage_));
  } else {
    text_ += text;
    for (auto& l : logprobs) logprobs_.push_back(std::move(l));
  }
  text_offset_ += code_points;
}

auto stream_writer::closing(std::string batch, std::string_view finish_reason) const -> std::string {
  if (websocket()) {
    event(batch, ws_event("done") + R"(,"model":)" + api::json_string(head_.model) + R"(,"finish_reason":")" +
                     std::string(finish_reason) + R"(","usage":{"prompt_tokens":)" + std::to_string(prompt_tokens_) +
                     R"(,"completion_tokens":)" + std::to_string(completion_tokens_) + R"(,"total_tokens":)" +
                     std::to_string(prompt_tokens_ + completion_tokens_) + "}}");
    return batch;
  }
  event(batch, api::stream_chunk(kind_, head_, "", finish_reason, nullptr, text_offset_, false, include_usage_));
  if (include_usage_) event(batch, api::usage_chunk(kind_, head_, {prompt_tokens_, completion_tokens_}));
  return batch + "data: [DONE]\n\n";
}

auto stream_writer::whole(std::string_view finish_reason) const -> std::string {
  return api::full_response(kind_, head_, text_, finish_reason, want_logprobs_ ? &logprobs_ : nullptr,
                            {prompt_tokens_, completion_tokens_});
}

auto stream_writer::error_closing(const api::api_error& e) const -> std::string {
  std::string out;
  event(out, websocket() ? api::ws_error_event(ws_id_, e.status, api::error_body(e)) : api::error_body(e));
  if (!websocket()) out += "data: [DONE]\n\n";
  return out;
}

void stream_writer::restart() {
  completion_tokens_ = 0;
  text_offset_ = 0;
  text_.clear();
  logprobs_.clear();
}

auto stream_writer::replay(const std::vector<std::string>& pieces) -> std::string {
  std::string batch;
  for (const auto& piece : pieces) {
    count_token();
    add_text(batch, piece, {});
  }
  return batch;
}

} // namespace troupe
