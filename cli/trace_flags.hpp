#pragma once
// The flags that say how to read a trace, shared by `troupe sim
// --server-config ... --trace FILE` and `troupe bench --dataset trace`:
// --trace-format, --time-scale, --max-rows, --trace-block-tokens
// (sim/trace.hpp). A scenario file sets the same as arrival.* keys.

#include "cli/args.hpp"
#include "sim/scenario.hpp"

#include <set>
#include <string>

namespace troupe::cli {

auto trace_flag_names() -> std::set<std::string>;

/// Sets sc's trace keys from the flags given; a usage_error for a bad value.
void apply_trace_flags(const args& a, sim::scenario& sc);

} // namespace troupe::cli
