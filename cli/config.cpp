// troupe config: the server's settings as TOML, every key with a comment
// saying what it does; --defaults: the built-in ones (config/default.toml).

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/config_source.hpp"

#include <cstdio>

namespace troupe::cli {

auto run_config(std::span<char* const> argv) -> int {
  const auto key_options = serve_key_options();
  const auto options = config_options(key_options);
  const args a(argv, options, {"defaults"}, 1);
  if (a.has("defaults")) {
    if (argv.size() > 1) throw usage_error("--defaults takes no other argument");
    std::fputs(default_server_config_toml().c_str(), stdout);
    return 0;
  }
  // What `troupe serve` would run with, given the same arguments.
  const auto source = config_source_of(a, key_options);
  const auto cfg = source.load();
  std::string header = "# troupe server settings: the built-in defaults";
  if (source.file) header += ", " + source.file->string() + "'s keys over them";
  if (!source.overrides.empty()) header += ", then the command line's";
  header += ".\n# (`troupe config --defaults` shows every default.)\n";
  std::fputs(render_server_config(cfg, header).c_str(), stdout);
  return 0;
}

} // namespace troupe::cli
