#include "service/http/openai/openai_protocol.hpp"

#include "base/utf8.hpp"
#include "service/http/openai/openai_api.hpp"
#include "service/http/openai/openai_format.hpp"

namespace troupe::api {

namespace {

void sse_event(std::string& out, std::string_view json) {
  out += "data: ";
  out += json;
  out += "\n\n";
}

} // namespace

auto openai_protocol::parse(std::string_view body, const sampling_params& defaults)
    -> std::variant<generation_request, api_error> {
  return parse_request(kind_, body, defaults);
}

auto openai_protocol::error_body(const api_error& e) const -> std::string { return api::error_body(e); }

auto openai_protocol::response_id(const generation_request& r, const std::string& request_id) const -> std::string {
  return (r.kind == endpoint::chat ? "chatcmpl-" : "cmpl-") + request_id;
}

auto openai_protocol::encoder(const generation_request& r, response_head head) const
    -> std::unique_ptr<wire_encoder> {
  return std::make_unique<openai_encoder>(r, std::move(head), streams(r));
}

auto openai_protocol::combine(const std::vector<std::string>& wholes, const usage& u) const -> std::string {
  return combine_choices(wholes, u);
}

openai_encoder::openai_encoder(const generation_request& r, response_head head, bool stream)
    : kind_(r.kind), stream_(stream), include_usage_(r.include_usage), want_logprobs_(r.want_logprobs),
      head_(std::move(head)) {}

auto openai_encoder::opening(const usage&) -> std::string {
  std::string first; // (chat's role chunk; a completions stream opens with its text)
  if (kind_ == endpoint::chat) sse_event(first, stream_chunk(kind_, head_, "", "", nullptr, 0, true, include_usage_));
  return first;
}

void openai_encoder::write(std::string& batch, std::span<const output_event> events, std::int64_t) {
  if (!stream_) return kept_.add(events);
  for (const auto& e : events) {
    if (e.what == output_event::kind::text) text(batch, e);
    else if (e.what == output_event::kind::reasoning) sse_event(batch, chat_delta_chunk(head_, "", e.text, {}, include_usage_));
  }
  if (auto calls = call_deltas(events); !calls.empty())
    sse_event(batch, chat_delta_chunk(head_, "", "", calls, include_usage_));
}

// A streamed text chunk. OpenAI's text_offset counts code points, not
// bytes. (Settled bytes end on a character boundary: a character settles
// all its bytes at once.)
void openai_encoder::text(std::string& batch, const output_event& e) {
  std::int64_t code_points = 0;
  for (const auto& l : e.logprobs) code_points += num_code_points(l.token);
  if (!e.text.empty() || !e.logprobs.empty())
    sse_event(batch, stream_chunk(kind_, head_, e.text, "", e.logprobs.empty() ? nullptr : &e.logprobs, text_offset_,
                                  false, include_usage_));
  text_offset_ += code_points;
}

auto openai_encoder::closing(std::string batch, const output_finish& f, const usage& u, bool tail) -> std::string {
  sse_event(batch, stream_chunk(kind_, head_, "", f.reason, nullptr, text_offset_, false, include_usage_));
  return tail ? batch + this->tail(u) : batch;
}

auto openai_encoder::tail(const usage& u) const -> std::string {
  std::string out;
  if (include_usage_) sse_event(out, usage_chunk(kind_, head_, u));
  return out + "data: [DONE]\n\n";
}

auto openai_encoder::whole(const output_finish& f, const usage& u) -> std::string {
  const auto* logprobs = want_logprobs_ ? &kept_.logprobs : nullptr;
  if (f.parsed) return chat_response(head_, kept_.text, kept_.reasoning, kept_.calls, f.reason, logprobs, u);
  return full_response(kind_, head_, kept_.text, f.reason, logprobs, u);
}

auto openai_encoder::error_closing(const api_error& e) -> std::string {
  std::string out;
  sse_event(out, api::error_body(e));
  return out + "data: [DONE]\n\n";
}

void openai_encoder::restart() {
  text_offset_ = 0;
  kept_ = {};
}

} // namespace troupe::api
