#include "service/http/anthropic/anthropic_protocol.hpp"

#include "base/json_text.hpp"
#include "service/http/reasoning_seal.hpp"

namespace troupe::api {

namespace {

void named_event(std::string& out, std::string_view name, std::string_view json) {
  out += "event: ";
  out += name;
  out += "\ndata: ";
  out += json;
  out += "\n\n";
}

} // namespace

auto anthropic_protocol::parse(std::string_view body, const sampling_params& defaults)
    -> std::variant<generation_request, api_error> {
  return anthropic::parse_request(body, defaults, &options_);
}

auto anthropic_protocol::error_body(const api_error& e) const -> std::string { return anthropic::error_body(e); }

auto anthropic_protocol::response_id(const generation_request&, const std::string& request_id) const
    -> std::string {
  return "chatcmpl-" + request_id; // (written as "msg_" and this)
}

auto anthropic_protocol::encoder(const generation_request& r, response_head head) const
    -> std::unique_ptr<wire_encoder> {
  return std::make_unique<anthropic_encoder>(r, options_, std::move(head), streams(r));
}

anthropic_encoder::anthropic_encoder(const generation_request& r, const anthropic::message_options& options,
                                     response_head head, bool stream)
    : head_(std::move(head)), stream_(stream), omit_thinking_(options.omit_thinking), edits_asked_(r.edits.any()) {}

void anthropic_encoder::delta(std::string& batch, const std::string& delta_json) const {
  named_event(batch, "content_block_delta",
              R"({"type":"content_block_delta","index":)" + std::to_string(block_index_) + R"(,"delta":)" +
                  delta_json + "}");
}

void anthropic_encoder::close_block(std::string& batch) {
  if (block_ == block::none) return;
  if (block_ == block::thinking) { // a thinking block ends with its signature: the text, sealed
    delta(batch, R"({"type":"signature_delta","signature":)" +
                     json_text::quoted(seal_ ? seal_->seal(block_thinking_) : std::string()) + "}");
    block_thinking_.clear();
  }
  named_event(batch, "content_block_stop",
              R"({"type":"content_block_stop","index":)" + std::to_string(block_index_) + "}");
  block_ = block::none;
}

void anthropic_encoder::open_block(std::string& batch, block kind, const std::string& start_json) {
  close_block(batch);
  block_ = kind;
  ++block_index_;
  named_event(batch, "content_block_start", R"({"type":"content_block_start","index":)" +
                                                std::to_string(block_index_) + R"(,"content_block":)" + start_json + "}");
}

auto anthropic_encoder::opening(const usage& u) -> std::string {
  std::string out;
  named_event(out, "message_start",
              R"({"type":"message_start","message":{"id":)" + json_text::quoted("msg_" + head_.id) +
                  R"(,"type":"message","role":"assistant","model":)" + json_text::quoted(head_.model) +
                  R"(,"content":[],"stop_reason":null,"stop_sequence":null,"usage":)" +
                  anthropic::usage_json(u, true) + "}}");
  return out;
}

void anthropic_encoder::write(std::string& batch, std::span<const output_event> events, std::int64_t) {
  if (!stream_) return kept_.add(events);
  for (const auto& e : events) event(batch, e);
}

void anthropic_encoder::event(std::string& batch, const output_event& e) {
  switch (e.what) {
  case output_event::kind::text:
    if (e.text.empty()) return;
    if (block_ != block::text) open_block(batch, block::text, R"({"type":"text","text":""})");
    return delta(batch, R"({"type":"text_delta","text":)" + json_text::quoted(e.text) + "}");
  case output_event::kind::reasoning:
    if (block_ != block::thinking) open_block(batch, block::thinking, R"({"type":"thinking","thinking":"","signature":""})");
    block_thinking_ += e.text;
    if (omit_thinking_) return; // (display "omitted": the signature alone carries it)
    return delta(batch, R"({"type":"thinking_delta","thinking":)" + json_text::quoted(e.text) + "}");
  case output_event::kind::call_start:
    open_block(batch, block::tool_use,
               R"({"type":"tool_use","id":)" + json_text::quoted(anthropic::tool_use_id(e.call_id)) + R"(,"name":)" +
                   json_text::quoted(e.name) + R"(,"input":{}})");
    [[fallthrough]];
  case output_event::kind::call_arguments:
    if (!e.text.empty()) delta(batch, R"({"type":"input_json_delta","partial_json":)" + json_text::quoted(e.text) + "}");
    return;
  }
}

auto anthropic_encoder::closing(std::string batch, const output_finish& f, const usage& u, bool) -> std::string {
  if (block_index_ < 0) open_block(batch, block::text, R"({"type":"text","text":""})");
  close_block(batch);
  named_event(batch, "message_delta",
              R"({"type":"message_delta","delta":{"stop_reason":)" +
                  json_text::quoted(anthropic::stop_reason(f.reason, !f.stop_sequence.empty())) +
                  R"(,"stop_sequence":)" +
                  (f.stop_sequence.empty() ? std::string("null") : json_text::quoted(f.stop_sequence)) +
                  R"(},"usage":)" + anthropic::usage_json(u, true) +
                  (edits_asked_ ? R"(,"context_management":)" + anthropic::applied_edits_json(applied_edits_)
                                : std::string()) +
                  "}");
  named_event(batch, "message_stop", R"({"type":"message_stop"})");
  return batch;
}

auto anthropic_encoder::whole(const output_finish& f, const usage& u) -> std::string {
  return anthropic::message(head_, kept_.text, kept_.reasoning, kept_.calls, f.reason, f.stop_sequence, u,
                            {omit_thinking_, seal_, edits_asked_ ? &applied_edits_ : nullptr});
}

auto anthropic_encoder::error_closing(const api_error& e) -> std::string {
  std::string out;
  named_event(out, "error", anthropic::error_body(e));
  return out;
}

void anthropic_encoder::restart() {
  block_ = block::none;
  block_index_ = -1;
  block_thinking_.clear();
  kept_ = {};
}

} // namespace troupe::api
