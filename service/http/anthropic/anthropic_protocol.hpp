#pragma once
// Anthropic's Messages API (POST /v1/messages) as a wire protocol: the body
// read by anthropic_api.hpp, and the answer written as a message or as its
// event stream (message_start, content blocks of text, thinking and
// tool_use, message_delta, message_stop).

#include "service/http/anthropic/anthropic_api.hpp"
#include "service/request/wire_encoder.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::api {

class anthropic_protocol final : public wire_protocol {
public:
  auto name() const -> std::string_view override { return "anthropic"; }
  auto parse(std::string_view body, const sampling_params& defaults)
      -> std::variant<generation_request, api_error> override;
  auto error_body(const api_error& e) const -> std::string override;
  auto response_id(const generation_request& r, const std::string& request_id) const -> std::string override;
  auto encoder(const generation_request& r, response_head head) const -> std::unique_ptr<wire_encoder> override;

private:
  anthropic::message_options options_;
};

class anthropic_encoder final : public wire_encoder {
public:
  anthropic_encoder(const generation_request& r, const anthropic::message_options& options, response_head head,
                    bool stream);
  void set_model(std::string model) override { head_.model = std::move(model); }
  void set_index(std::int32_t index) override { head_.index = index; }
  void set_seal(const reasoning_seal* seal) override { seal_ = seal; }
  void set_applied_edits(std::vector<applied_edit> edits) override { applied_edits_ = std::move(edits); }
  auto opening(const usage& u) -> std::string override;
  void write(std::string& batch, std::span<const output_event> events, std::int64_t tokens) override;
  auto closing(std::string batch, const output_finish& f, const usage& u, bool tail) -> std::string override;
  auto whole(const output_finish& f, const usage& u) -> std::string override;
  auto error_closing(const api_error& e) -> std::string override;
  void restart() override;

private:
  enum class block { none, text, thinking, tool_use };
  void delta(std::string& batch, const std::string& delta_json) const;
  /// A content block opened (the open one closed first), or closed.
  void open_block(std::string& batch, block kind, const std::string& start_json);
  void close_block(std::string& batch);
  void event(std::string& batch, const output_event& e);

  response_head head_;
  bool stream_;
  bool omit_thinking_;  ///< thinking.display "omitted"
  bool edits_asked_;    ///< context_management given: its applied_edits are written
  std::vector<applied_edit> applied_edits_;
  const reasoning_seal* seal_ = nullptr;
  block block_ = block::none;
  int block_index_ = -1;
  std::string block_thinking_; ///< the open thinking block's text (its signature seals it)
  whole_answer kept_;          ///< not streamed
};

} // namespace troupe::api
