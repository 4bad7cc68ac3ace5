#include "service/http/stream_writer.hpp"
#include "base/json_text.hpp"

#include "service/http/anthropic_api.hpp"

#include "base/rng.hpp"
#include "base/utf8.hpp"

namespace troupe {

namespace {

auto mix(std::uint64_t x) -> std::uint64_t { return splitmix64_mix(x + splitmix64_gamma); }

} // namespace

stream_writer::stream_writer(const api::completion_request& body, std::string ws_id, api::response_head head,
                             std::string_view tool_parser)
  : kind_(body.kind),
    stream_(body.stream),
    include_usage_(body.include_usage),
    ws_id_(std::move(ws_id)),
    head_(std::move(head)),
    want_logprobs_(body.want_logprobs),
    tool_family_(tool_parser),
    wire_(body.wire),
    edits_asked_(body.anthropic.edits.any()),
    omit_thinking_(body.anthropic.omit_thinking) {
  if (wire_ == api::wire::responses)
    responses_ = std::make_unique<api::responses::response_builder>(body, head_, streaming());
  restart();
}

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

void stream_writer::named_event(std::string& out, std::string_view name, std::string_view json) const {
  out += "event: ";
  out += name;
  out += "\ndata: ";
  out += json;
  out += "\n\n";
}

void stream_writer::close_block(std::string& batch) {
  if (block_ == 0) return;
  if (block_ == 2) { // a thinking block ends with its signature: the text, sealed
    named_event(batch, "content_block_delta",
                R"({"type":"content_block_delta","index":)" + std::to_string(block_index_) +
                    R"(,"delta":{"type":"signature_delta","signature":)" +
                    json_text::quoted(seal_ ? seal_->seal(block_thinking_) : std::string()) + "}}");
    block_thinking_.clear();
  }
  named_event(batch, "content_block_stop",
              R"({"type":"content_block_stop","index":)" + std::to_string(block_index_) + "}");
  block_ = 0;
}

void stream_writer::open_block(std::string& batch, int kind, const std::string& start_json) {
  close_block(batch);
  block_ = kind;
  ++block_index_;
  named_event(batch, "content_block_start", R"({"type":"content_block_start","index":)" +
                                                std::to_string(block_index_) + R"(,"content_block":)" + start_json + "}");
}

auto stream_writer::ws_event(std::string_view type) const -> std::string {
  return R"({"type":")" + std::string(type) + R"(","id":)" + ws_id_;
}

auto stream_writer::opening() const -> std::string {
  if (responses_) return responses_->opening();
  if (wire_ == api::wire::anthropic) {
    std::string out;
    std::string head = R"({"type":"message_start","message":{"id":)" + json_text::quoted("msg_" + head_.id) +
                       R"(,"type":"message","role":"assistant","model":)" + json_text::quoted(head_.model) +
                       R"(,"content":[],"stop_reason":null,"stop_sequence":null,"usage":)" +
                       api::anthropic::usage_json(usage(), true) + "}}";
    named_event(out, "message_start", head);
    return out;
  }
  if (websocket()) return ws_event("start") + R"(,"model":)" + json_text::quoted(head_.model) + "}\n";
  std::string first;
  if (kind_ == api::endpoint::chat) event(first, api::stream_chunk(kind_, head_, "", "", nullptr, 0, true, include_usage_));
  return first;
}

void stream_writer::start_reasoning(bool inside) {
  reasoning_inside_ = inside;
  reasoning_ = std::make_unique<tools::reasoning_parser>(inside);
}

void stream_writer::add_text(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs) {
  if (reasoning_) {
    auto split = reasoning_->feed(text);
    reasoning(batch, split.reasoning);
    return content(batch, split.content, std::move(logprobs));
  }
  content(batch, text, std::move(logprobs));
}

void stream_writer::content(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs) {
  if (tools_) return emit(batch, tools_->feed(text), std::move(logprobs));
  plain_text(batch, text, std::move(logprobs));
}

void stream_writer::reasoning(std::string& batch, std::string_view text) {
  if (text.empty()) return;
  if (responses_) {
    responses_->reasoning(batch, text);
  } else if (wire_ == api::wire::anthropic && stream_) {
    if (block_ != 2) open_block(batch, 2, R"({"type":"thinking","thinking":"","signature":""})");
    block_thinking_ += text;
    if (omit_thinking_) return; // (display "omitted": the signature alone carries it)
    named_event(batch, "content_block_delta", R"({"type":"content_block_delta","index":)" + std::to_string(block_index_) +
                                                  R"(,"delta":{"type":"thinking_delta","thinking":)" +
                                                  json_text::quoted(text) + "}}");
  } else if (websocket())
    event(batch, ws_event("reasoning") + R"(,"n":)" + std::to_string(completion_tokens_) + R"(,"text":)" +
                     json_text::quoted(text) + "}");
  else if (stream_)
    event(batch, api::chat_delta_chunk(head_, "", text, {}, include_usage_));
  else
    reasoning_text_ += text;
}

void stream_writer::flush_parsers(std::string& batch) {
  if (reasoning_) {
    auto split = reasoning_->finish();
    reasoning(batch, split.reasoning);
    content(batch, split.content, {});
  }
  if (tools_) emit(batch, tools_->finish(), {});
}

void stream_writer::emit(std::string& batch, const tools::parse_delta& d, std::vector<api::token_logprob> logprobs) {
  if (!d.content.empty() || !logprobs.empty()) plain_text(batch, d.content, std::move(logprobs));
  if (d.calls.empty()) return;
  for (const auto& c : d.calls) num_calls_ = std::max(num_calls_, c.index + 1);
  if (responses_) {
    responses_->calls(batch, d.calls);
  } else if (wire_ == api::wire::anthropic && stream_) {
    for (const auto& c : d.calls) {
      if (!c.id.empty())
        open_block(batch, 3, R"({"type":"tool_use","id":)" + json_text::quoted(api::anthropic::tool_use_id(c.id)) +
                                 R"(,"name":)" + json_text::quoted(c.name) + R"(,"input":{}})");
      if (!c.arguments.empty())
        named_event(batch, "content_block_delta", R"({"type":"content_block_delta","index":)" +
                                                      std::to_string(block_index_) +
                                                      R"(,"delta":{"type":"input_json_delta","partial_json":)" +
                                                      json_text::quoted(c.arguments) + "}}");
    }
  } else if (websocket()) {
    for (const auto& c : d.calls)
      event(batch, ws_event("tool_call") + R"(,"n":)" + std::to_string(completion_tokens_) + R"(,"index":)" +
                       std::to_string(c.index) +
                       (c.id.empty() ? std::string() : R"(,"call_id":)" + json_text::quoted(c.id) + R"(,"name":)" + json_text::quoted(c.name)) +
                       R"(,"arguments":)" + json_text::quoted(c.arguments) + "}");
  } else if (stream_) {
    event(batch, api::chat_delta_chunk(head_, "", "", d.calls, include_usage_));
  } else {
    std::string ignored;
    tools::merge({{}, d.calls}, ignored, calls_);
  }
}

void stream_writer::plain_text(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs) {
  // OpenAI's text_offset counts code points, not bytes. (Settled bytes end
  // on a character boundary: a character settles all its bytes at once.)
  std::int64_t code_points = 0;
  for (const auto& l : logprobs) code_points += num_code_points(l.token);
  if (responses_) {
    responses_->text(batch, text);
  } else if (wire_ == api::wire::anthropic && stream_) {
    if (!text.empty()) {
      if (block_ != 1) open_block(batch, 1, R"({"type":"text","text":""})");
      named_event(batch, "content_block_delta", R"({"type":"content_block_delta","index":)" +
                                                    std::to_string(block_index_) + R"(,"delta":{"type":"text_delta","text":)" +
                                                    json_text::quoted(text) + "}}");
    }
  } else if (websocket()) {
    if (!text.empty())
      event(batch, ws_event("token") + R"(,"n":)" + std::to_string(completion_tokens_) + R"(,"text":)" +
                       json_text::quoted(text) + "}");
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

auto stream_writer::final_reason(std::string_view finish_reason) const -> std::string_view {
  return num_calls_ > 0 && finish_reason == "stop" ? "tool_calls" : finish_reason;
}

auto stream_writer::closing(std::string batch, std::string_view reason, bool tail) -> std::string {
  flush_parsers(batch);
  const auto finish_reason = final_reason(reason);
  if (responses_) return responses_->closing(std::move(batch), finish_reason, usage());
  if (wire_ == api::wire::anthropic) {
    if (block_index_ < 0) open_block(batch, 1, R"({"type":"text","text":""})");
    close_block(batch);
    named_event(batch, "message_delta",
                R"({"type":"message_delta","delta":{"stop_reason":)" +
                    json_text::quoted(api::anthropic::stop_reason(finish_reason, !stop_sequence_.empty())) +
                    R"(,"stop_sequence":)" + (stop_sequence_.empty() ? std::string("null") : json_text::quoted(stop_sequence_)) +
                    R"(},"usage":)" + api::anthropic::usage_json(usage(), true) +
                    (edits_asked_ ? R"(,"context_management":)" + api::anthropic::applied_edits_json(applied_edits_) : std::string()) +
                    "}");
    named_event(batch, "message_stop", R"({"type":"message_stop"})");
    return batch;
  }
  if (websocket()) {
    event(batch, ws_event("done") + R"(,"model":)" + json_text::quoted(head_.model) + R"(,"finish_reason":")" +
                     std::string(finish_reason) + R"(","usage":{"prompt_tokens":)" + std::to_string(prompt_tokens_) +
                     R"(,"completion_tokens":)" + std::to_string(completion_tokens_) + R"(,"total_tokens":)" +
                     std::to_string(prompt_tokens_ + completion_tokens_) + "}}");
    return batch;
  }
  event(batch, api::stream_chunk(kind_, head_, "", finish_reason, nullptr, text_offset_, false, include_usage_));
  return tail ? batch + this->tail(usage()) : batch;
}

auto stream_writer::tail(const api::usage& u) const -> std::string {
  std::string out;
  if (include_usage_) event(out, api::usage_chunk(kind_, head_, u));
  return out + "data: [DONE]\n\n";
}

auto stream_writer::whole(std::string_view reason) -> std::string {
  if (responses_) {
    std::string ignored;
    flush_parsers(ignored);
    return responses_->whole(final_reason(reason), usage());
  }
  if (wire_ == api::wire::anthropic) {
    std::string ignored;
    flush_parsers(ignored);
    return api::anthropic::message(head_, text_, reasoning_text_, calls_, final_reason(reason), stop_sequence_,
                                   usage(), {omit_thinking_, seal_, edits_asked_ ? &applied_edits_ : nullptr});
  }
  if (tools_ || reasoning_) {
    std::string ignored;
    flush_parsers(ignored);
    return api::chat_response(head_, text_, reasoning_text_, calls_, final_reason(reason),
                              want_logprobs_ ? &logprobs_ : nullptr, usage());
  }
  return api::full_response(kind_, head_, text_, reason, want_logprobs_ ? &logprobs_ : nullptr,
                            usage());
}

auto stream_writer::error_closing(const api::api_error& e) const -> std::string {
  std::string out;
  if (responses_) return responses_->error_event(e);
  if (wire_ == api::wire::anthropic) {
    named_event(out, "error", api::anthropic::error_body(e));
    return out;
  }
  event(out, websocket() ? api::ws_error_event(ws_id_, e.status, api::error_body(e)) : api::error_body(e));
  if (!websocket()) out += "data: [DONE]\n\n";
  return out;
}

void stream_writer::restart() {
  completion_tokens_ = 0;
  text_offset_ = 0;
  text_.clear();
  logprobs_.clear();
  calls_.clear();
  num_calls_ = 0;
  tools_.reset();
  reasoning_text_.clear();
  stop_sequence_.clear();
  block_ = 0;
  block_index_ = -1;
  block_thinking_.clear();
  if (reasoning_) reasoning_ = std::make_unique<tools::reasoning_parser>(reasoning_inside_);
  if (responses_) responses_->reset();
  if (!tool_family_.empty()) {
    // Call ids as OpenAI's look ("call_" and 24 characters), a function of
    // the response's id: a repeated request gets the same ones.
    const auto seed = std::hash<std::string>{}(head_.id);
    tools_ = tools::make_tool_parser(tool_family_, [seed, n = std::uint64_t{0}]() mutable {
      static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
      std::string id = "call_";
      auto x = mix(seed ^ mix(++n));
      for (int i = 0; i < 24; ++i) {
        if (i % 8 == 0) x = mix(x + static_cast<std::uint64_t>(i)); // 8 characters use 48 of its bits
        id += alphabet[x % 62];
        x /= 62;
      }
      return id;
    });
  }
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
