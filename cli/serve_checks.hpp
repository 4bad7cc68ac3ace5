#pragma once
// What `troupe serve` refuses in its configuration, all checked before any
// port opens: a configuration that will be refused never prints "listening
// on". What the checks read on the way (each model's facts, its chat
// template, the workers' secret) is kept for the start that follows.

#include "cli/replicas.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "service/server_config.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace troupe::cli {

/// One model to serve, checked: [model], or a model.more entry made a
/// whole config (its dir, name, version and replicas; no step log).
struct model_plan {
  server_config cfg;
  std::string name;                           ///< what clients call it
  std::int32_t canary_percent = 0;            ///< > 0: a canary version of a model before it
  model_setup setup;                          ///< prepare_model's
  fleet_plan plan;                            ///< plan_fleet's
  std::shared_ptr<const chat_template> chat;  ///< none: the model ships none and none was named
};

/// What `troupe serve` starts once nothing in its configuration is refused.
struct serve_plan {
  std::vector<model_plan> models; ///< [model] first, then model.more in order
  std::string worker_secret;      ///< router.worker_secret_file's, where router.worker_port is set
};

/// Every refusal of cfg that `troupe serve` makes at start-up, before it
/// listens: the served names, canaries and capability rules; each model's
/// config, devices, KV cache, fleet, chat template, policies and step log;
/// the listeners' addresses and ports; the workers' secret and TLS files.
/// Throws one line naming the key. Blocking (reads each model's config and
/// tokenizer, not its weights).
auto check_serve_config(const server_config& cfg) -> serve_plan;

} // namespace troupe::cli
