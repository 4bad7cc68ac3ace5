#pragma once
// OpenAI's Responses API (POST /v1/responses) as a wire protocol: the body
// read by responses_api.hpp, its own fields (the response's id, the stored
// conversation it continues, what its answer echoes) kept here, and the
// answer written by a response_builder.

#include "service/http/responses/responses_api.hpp"
#include "service/request/wire_encoder.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <variant>

namespace troupe::api {

class responses_protocol final : public wire_protocol {
public:
  auto name() const -> std::string_view override { return "responses"; }
  auto parse(std::string_view body, const sampling_params& defaults)
      -> std::variant<generation_request, api_error> override;
  auto error_body(const api_error& e) const -> std::string override;
  /// fields().id, which the gateway sets ("resp_...").
  auto response_id(const generation_request& r, const std::string& request_id) const -> std::string override;
  auto encoder(const generation_request& r, response_head head) const -> std::unique_ptr<wire_encoder> override;
  /// What the request carries besides its generation request: the gateway
  /// sets the id and reads store and previous_response_id.
  auto fields() -> responses::responses_fields& { return fields_; }

private:
  responses::responses_fields fields_;
};

} // namespace troupe::api
