// `troupe sim SCENARIO.toml`: the discrete-event simulator (sim/).

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "sim/replay.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace troupe::cli {

auto run_sim(std::span<char* const> argv) -> int {
  const args a(argv, {"out", "set", "replay"}, {"quiet", "progress"}, 1);
  if (a.has("replay")) {
    if (!a.positional().empty()) throw usage_error("--replay takes a step log instead of a scenario");
    const auto r = sim::replay_step_log(a.str("replay", ""));
    if (!r.identical) {
      std::fprintf(stderr, "troupe sim: replay differs at %s\n", r.difference.c_str());
      return 1;
    }
    std::printf("replayed %s: %lld submissions, %lld schedule decisions (%lld steps), all identical to the server's\n",
                a.str("replay", "").c_str(), static_cast<long long>(r.submissions),
                static_cast<long long>(r.schedules), static_cast<long long>(r.steps));
    return 0;
  }
  if (a.positional().empty()) throw usage_error("sim needs a scenario file, e.g. config/sim/chat.toml");
  // (A scenario_error reaches main(), which prints "troupe sim: <what>".)
  const auto runs = sim::load_scenario(a.positional().front(), a.key_values("set"));
  // A progress bar on a terminal (or when asked), on stderr: never part of the results.
  const bool progress = !a.has("quiet") && (a.has("progress") || isatty(STDERR_FILENO));
  std::vector<sim::run_result> results;
  std::vector<sim::run_summary> summaries;
  for (const auto& sc : runs) {
    sim::run_options o;
    o.keep_steps = a.has("out");
    const auto started = std::chrono::steady_clock::now();
    if (progress)
      o.progress = [&](std::int64_t done, std::int64_t total) {
        const int width = 40, filled = static_cast<int>(width * done / std::max<std::int64_t>(total, 1));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::fprintf(stderr, "\r%-24.24s [%.*s%*s] %lld/%lld requests, %.1f s", sc.name.c_str(), filled,
                     "########################################", width - filled, "", static_cast<long long>(done),
                     static_cast<long long>(total), s);
        if (done >= total) std::fputc('\n', stderr);
      };
    auto r = sim::simulate(sc, o);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!a.has("quiet"))
      std::fprintf(stderr, "%s: %zu requests simulated in %.2f s (%.0f requests/s); %s\n", sc.name.c_str(),
                   r.requests.size(), wall, static_cast<double>(r.requests.size()) / std::max(wall, 1e-9),
                   r.cost_description.c_str());
    summaries.push_back(sim::summarize(r));
    if (a.has("out")) results.push_back(std::move(r));
  }
  sim::print_summaries(stdout, summaries);
  if (a.has("out")) sim::write_results(a.str("out", ""), results, summaries);
  return 0;
}

} // namespace troupe::cli
