// libFuzzer harness (make fuzz): the server config and the tenants file on
// any text. Every input must give settings or one config_error, never a crash.

#include "service/server_config.hpp"
#include "service/tenancy/tenants.hpp"
#include <cstdint>
#include <stdexcept>
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try { (void)troupe::parse_server_config(text, "fuzz.toml"); } catch (const troupe::config_error&) {}
  try { (void)troupe::parse_tenants(text, "fuzz.toml"); } catch (const troupe::config_error&) {}
  return 0;
}
