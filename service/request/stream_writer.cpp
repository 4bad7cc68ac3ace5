#include "service/request/stream_writer.hpp"

namespace troupe {

stream_writer::stream_writer(const api::wire_protocol& protocol, const api::generation_request& body,
                             api::response_head head, std::string_view tool_parser)
    : head_(std::move(head)),
      streaming_(protocol.streams(body)),
      sse_(protocol.sse()),
      encoder_(protocol.encoder(body, head_)),
      text_(std::string(tool_parser), head_.id) {}

auto stream_writer::to(std::string& batch) -> text_assembler::emit {
  return [this, &batch](std::span<const output_event> events) { encoder_->write(batch, events, completion_tokens_); };
}

void stream_writer::add_text(std::string& batch, std::string_view text, std::vector<api::token_logprob> logprobs) {
  text_.feed(text, std::move(logprobs), to(batch));
}

auto stream_writer::finish(std::string& batch, std::string_view finish_reason) -> output_finish {
  text_.finish(to(batch));
  return {text_.final_reason(finish_reason), stop_sequence_, text_.parsed()};
}

auto stream_writer::closing(std::string batch, std::string_view finish_reason, bool tail) -> std::string {
  const auto f = finish(batch, finish_reason);
  return encoder_->closing(std::move(batch), f, usage(), tail);
}

auto stream_writer::whole(std::string_view finish_reason) -> std::string {
  std::string ignored; // (no events when not streamed)
  const auto f = finish(ignored, finish_reason);
  return encoder_->whole(f, usage());
}

void stream_writer::restart() {
  completion_tokens_ = 0;
  stop_sequence_.clear();
  text_.restart();
  encoder_->restart();
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
