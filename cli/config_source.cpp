#include "cli/config_source.hpp"

#include <array>

namespace troupe::cli {

auto serve_key_options() -> std::span<const key_option> {
  static constexpr std::array options = {key_option{"port", "server.port"}, key_option{"host", "server.host"},
                                         key_option{"scheduling", "scheduler.policy"},
                                         key_option{"step-log", "engine.step_log"}};
  return options;
}

auto config_source::load() const -> server_config {
  return file ? load_server_config(*file, overrides) : default_server_config(overrides);
}

auto config_options(std::span<const key_option> key_options) -> std::set<std::string> {
  std::set<std::string> out{"config", "model", "set"};
  for (const auto& o : key_options) out.insert(o.option);
  return out;
}

auto config_source_of(const args& a, std::span<const key_option> key_options) -> config_source {
  config_source out;
  if (a.has("config")) out.file = a.str("config", "");
  if (!a.positional().empty() && a.has("model"))
    throw usage_error("give the model directory once: as an argument or with --model");
  if (!a.positional().empty()) out.overrides.emplace_back("model.dir", a.positional().front());
  if (a.has("model")) out.overrides.emplace_back("model.dir", a.str("model", ""));
  // In the order of the keys: a --set of the same key comes last and wins.
  for (const auto& o : key_options)
    if (a.has(o.option)) out.overrides.emplace_back(o.key, a.str(o.option, ""));
  for (auto& kv : a.key_values("set")) out.overrides.push_back(std::move(kv));
  return out;
}

} // namespace troupe::cli
