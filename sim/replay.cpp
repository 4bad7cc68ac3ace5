#include "sim/replay.hpp"

#include "engine/core/batch_scheduler.hpp"
#include "engine/core/leased_blocks.hpp"
#include "engine/core/step_log.hpp"
#include "policies/registry.hpp"

#include <stdexcept>

namespace troupe::sim {

auto replay_step_log(const std::filesystem::path& file) -> replay_report {
  step_log::reader log(file);
  const auto& cfg = log.config();
  std::unique_ptr<policy::scheduling_policy> policy;
  try {
    policy = policy::make_scheduling_policy(cfg.policy);
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  leased_blocks lease(cfg.share);
  kv_cache_manager kv(lease, cfg.kv);
  batch_scheduler core(cfg.limits, kv, *policy, cfg.eos_ids);
  replay_report report;
  scheduler_output pending;
  double duration = 0; ///< the step under way's, from its `step` line
  const auto differ = [&](const std::string& what, const std::string& logged, const std::string& replayed) {
    if (!report.identical) return;
    report.identical = false;
    report.difference = file.string() + ":" + std::to_string(log.line_number()) + ": " + what + ": logged " + logged +
                        " / replayed " + replayed;
  };
  while (auto e = log.next()) {
    switch (e->type) {
      case step_log::event::kind::lease: lease.add(e->blocks); break;
      case step_log::event::kind::shrink: lease.shrink_to(e->keep); break;
      case step_log::event::kind::submit: {
        ++report.submissions;
        const auto status = core.submit(e->req).status;
        if (status != e->status) differ("submission", std::to_string(e->status), std::to_string(status));
        break;
      }
      case step_log::event::kind::abort: (void)core.abort(e->req.id); break;
      case step_log::event::kind::schedule: {
        ++report.schedules;
        pending = core.schedule(e->now_s);
        const auto plan = step_log::plan_of(pending);
        if (plan != e->plan) differ("schedule", e->plan, plan);
        break;
      }
      case step_log::event::kind::step: duration = e->duration; break;
      case step_log::event::kind::sampled:
        ++report.steps;
        (void)core.update(pending, e->result);
        core.observe_step(duration); // as the server's scheduler did, with the time it measured
        break;
    }
    (void)lease.take_outbox(); // the memory manager's business, not this replica's decisions
    if (!report.identical) break;
  }
  return report;
}

} // namespace troupe::sim
