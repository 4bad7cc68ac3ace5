#pragma once
// Decision fidelity: drives the server's scheduler core, rebuilt from a step
// log's config line, with the events the log recorded (submissions, aborts,
// lease changes, the executor's sampled tokens, the clock at each step), and
// checks that every step it schedules is the one the server scheduled.

#include <cstdint>
#include <filesystem>
#include <string>

namespace troupe::sim {

struct replay_report {
  std::int64_t schedules = 0; ///< schedule decisions compared
  std::int64_t steps = 0;     ///< of those, steps the executor ran
  std::int64_t submissions = 0;
  bool identical = true;
  std::string difference; ///< the first: "file:line: logged ... / replayed ..."
};

/// Throws std::runtime_error for a malformed or unreadable log.
auto replay_step_log(const std::filesystem::path& file) -> replay_report;

} // namespace troupe::sim
