#pragma once
// Helpers of the config.json tests (model_config_test, model_config_experts_test).

#include "engine/model/model_config.hpp"
#include "tests/engine/model/model_test_util.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>

namespace troupe::test {

/// config.json (and generation_config.json where given) in dir, loaded.
inline auto load_config(const temp_dir& dir, const std::string& config, const char* generation = nullptr)
    -> model_config {
  write_file(dir / "config.json", config);
  if (generation != nullptr) write_file(dir / "generation_config.json", generation);
  return model_config::load(dir.path());
}

/// The error from loading `base` as config.json with one substring replaced.
inline auto edited_config_error(const temp_dir& dir, std::string_view from, std::string_view to,
                                const std::string& base) -> std::string {
  auto text = base;
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  write_file(dir / "config.json", text);
  return error_of([&] { model_config::load(dir.path()); });
}

/// c saved and loaded again is c.
inline void check_round_trip(const model_config& c) {
  const temp_dir dir;
  c.save(dir.path());
  CHECK(model_config::load(dir.path()) == c);
}

} // namespace troupe::test
