#include "service/http/responses/responses_protocol.hpp"

#include "service/http/openai/openai_format.hpp"
#include "service/http/responses/response_builder.hpp"

namespace troupe::api {

auto responses_protocol::parse(std::string_view body, const sampling_params& defaults)
    -> std::variant<generation_request, api_error> {
  return responses::parse_request(body, defaults, fields_);
}

auto responses_protocol::error_body(const api_error& e) const -> std::string { return api::error_body(e); }

auto responses_protocol::response_id(const generation_request&, const std::string&) const -> std::string {
  return fields_.id;
}

auto responses_protocol::encoder(const generation_request& r, response_head head) const
    -> std::unique_ptr<wire_encoder> {
  return std::make_unique<responses::response_builder>(r, fields_, std::move(head), streams(r));
}

} // namespace troupe::api
