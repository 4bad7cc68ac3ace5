#pragma once
// OpenAI's /v1/completions and /v1/chat/completions as a wire protocol: the
// body read by openai_api.hpp, and each choice's answer written by an
// encoder as SSE chunks or as one response (openai_format.hpp).

#include "service/request/wire_encoder.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::api {

class openai_protocol final : public wire_protocol {
public:
  explicit openai_protocol(endpoint kind) : kind_(kind) {}
  auto name() const -> std::string_view override { return "openai"; }
  auto parse(std::string_view body, const sampling_params& defaults)
      -> std::variant<generation_request, api_error> override;
  auto error_body(const api_error& e) const -> std::string override;
  auto response_id(const generation_request& r, const std::string& request_id) const -> std::string override;
  auto encoder(const generation_request& r, response_head head) const -> std::unique_ptr<wire_encoder> override;
  auto combine(const std::vector<std::string>& wholes, const usage& u) const -> std::string override;

private:
  endpoint kind_;
};

/// One choice of an OpenAI answer: chunks of "text_completion" or
/// "chat.completion.chunk" (text, logprobs with code-point text offsets,
/// reasoning_content and tool_calls deltas), the usage chunk and [DONE]; or
/// the whole body.
class openai_encoder final : public wire_encoder {
public:
  openai_encoder(const generation_request& r, response_head head, bool stream);
  void set_model(std::string model) override { head_.model = std::move(model); }
  void set_index(std::int32_t index) override { head_.index = index; }
  auto opening(const usage& u) -> std::string override;
  void write(std::string& batch, std::span<const output_event> events, std::int64_t tokens) override;
  auto closing(std::string batch, const output_finish& f, const usage& u, bool tail) -> std::string override;
  auto tail(const usage& u) const -> std::string override;
  auto whole(const output_finish& f, const usage& u) -> std::string override;
  auto error_closing(const api_error& e) -> std::string override;
  void restart() override;

private:
  void text(std::string& batch, const output_event& e);

  endpoint kind_;
  bool stream_, include_usage_, want_logprobs_;
  response_head head_;
  std::int64_t text_offset_ = 0; ///< code points in the settled tokens' bytes
  whole_answer kept_;            ///< not streamed
};

} // namespace troupe::api
