#pragma once
// Request traces, read as the simulator and `troupe bench --dataset trace`
// replay them. Four formats, told apart by their first line:
//
// - troupe's CSV: arrival_s, prompt_tokens, output_tokens (required),
//   tenant, priority, prefix_group (optional; an empty cell is the default).
// - Azure LLM inference traces 2023/2024: CSV TIMESTAMP, ContextTokens,
//   GeneratedTokens; TIMESTAMP a date and time ("2023-11-16 18:15:46.6805900").
// - BurstGPT: CSV Timestamp (seconds), Model, Request tokens, Response
//   tokens, Total tokens, Log Type; a failed request has 0 response tokens.
// - Mooncake / Qwen-Bailian: JSON lines {"timestamp" (ms), "input_length",
//   "output_length", "hash_ids"}; the i-th hash id names the prompt's i-th
//   block of block_tokens tokens (512 by the traces' convention), so two
//   prompts whose ids agree share those blocks' tokens.
//
// Arrival times must not decrease. The public formats' times start at 0 at
// their first row; a row of one with no prompt or no output tokens (a
// failed request) is skipped and counted.

#include "sim/workload.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace troupe::sim {

struct trace_options {
  std::string format = "auto"; ///< auto (from the first line), troupe, azure, burstgpt, mooncake
  double time_scale = 1;       ///< arrival times are multiplied by it (0.5: the trace twice as fast); > 0
  std::int64_t max_rows = 0;   ///< the first this many requests (0: all)
  std::int32_t block_tokens = 512; ///< mooncake: tokens per hash id
  std::int32_t prefix_tokens = 0;  ///< troupe: a prefix_group's shared tokens (at most all but one)
};

struct trace {
  std::string format;                              ///< the one read
  std::vector<sim_request> requests;               ///< index i is the i-th kept row
  std::vector<std::vector<std::uint64_t>> blocks;  ///< mooncake: each request's hash ids (else empty)
  std::int64_t skipped = 0;                        ///< failed requests left out
};

/// What trace_options::format takes: "auto", then each format.
auto trace_format_names() -> std::vector<std::string>;

/// Reads `file`; a troupe CSV's tenant names are looked up in, or appended
/// to, `tenants` (sim_request::tenant indexes it). Throws scenario_error
/// naming the file and line of a malformed row.
auto read_trace(const std::filesystem::path& file, const trace_options& options, std::vector<std::string>& tenants)
    -> trace;

} // namespace troupe::sim
