#include "cli/trace_flags.hpp"

#include "settings/toml_settings.hpp"
#include "sim/trace.hpp"

#include <algorithm>

namespace troupe::cli {

auto trace_flag_names() -> std::set<std::string> {
  return {"trace-format", "time-scale", "max-rows", "trace-block-tokens"};
}

void apply_trace_flags(const args& a, sim::scenario& sc) {
  const auto formats = sim::trace_format_names();
  sc.trace_format = a.str("trace-format", sc.trace_format);
  if (std::find(formats.begin(), formats.end(), sc.trace_format) == formats.end())
    throw usage_error("--trace-format is one of " + settings::joined(formats));
  sc.time_scale = a.real("time-scale", sc.time_scale);
  if (!(sc.time_scale > 0)) throw usage_error("--time-scale must be > 0");
  sc.max_rows = a.integer("max-rows", sc.max_rows);
  if (sc.max_rows < 0) throw usage_error("--max-rows must be >= 0 (0: every row)");
  const auto block = a.integer("trace-block-tokens", sc.trace_block_tokens);
  if (block < 1 || block > (1 << 20)) throw usage_error("--trace-block-tokens must be in [1, 1048576]");
  sc.trace_block_tokens = static_cast<std::int32_t>(block);
}

} // namespace troupe::cli
