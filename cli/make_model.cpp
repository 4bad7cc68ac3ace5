// troupe make-model: writes a preset's model directory.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/model/presets.hpp"
#include "engine/model/tiny_model.hpp"

#include <cstdio>

namespace troupe::cli {

auto run_make_model(std::span<char* const> argv) -> int {
  const args a(argv, {"preset", "out", "seed"}, {});
  const auto preset = a.required("preset");
  const auto out = a.required("out");
  if (!preset_config(preset)) {
    std::string known;
    for (auto n : preset_names()) known += (known.empty() ? "" : ", ") + std::string(n);
    throw usage_error("unknown preset '" + preset + "' (known: " + known + ")");
  }
  make_model(preset, out, static_cast<std::uint64_t>(a.integer("seed", 1)));
  std::printf("wrote %s model to %s\n", preset.c_str(), out.c_str());
  return 0;
}

} // namespace troupe::cli
