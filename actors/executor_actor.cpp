#include "actors/executor_actor.hpp"

#include <caf/all.hpp>

namespace troupe {
namespace {

auto executor_behavior(executor_actor::pointer, std::shared_ptr<executor> ex) -> executor_actor::behavior_type {
  return {
      [ex](execute_atom, const step_ptr& step) -> step_result { return ex->execute(*step); },
  };
}

} // namespace

auto spawn_executor(caf::actor_system& sys, std::shared_ptr<executor> ex) -> executor_actor {
  return sys.spawn<caf::detached>(executor_behavior, std::move(ex));
}

} // namespace troupe
