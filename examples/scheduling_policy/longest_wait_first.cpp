// An out-of-tree scheduling policy: built as a shared object against
// policies/api/ alone, loaded by troupe by path. It admits the requests that
// have waited longest relative to their prompt (a crude response-ratio rule,
// HRRN) and preempts the running request with the most work left.
//
//   c++ -std=c++20 -shared -fPIC -I<troupe source> longest_wait_first.cpp -o liblongest_wait_first.so
//   troupe serve --scheduling $PWD/liblongest_wait_first.so

#include "policies/api/plugin.hpp"

#include <algorithm>

#ifndef EXAMPLE_ABI_VERSION // the tests build one copy with a wrong version
#define EXAMPLE_ABI_VERSION troupe::policy::abi_version
#endif

namespace {

using namespace troupe::policy;

class longest_wait_first final : public scheduling_policy {
public:
  auto name() const -> std::string_view override { return "longest_wait_first"; }

  auto admission_order(const schedule_view& v) -> std::vector<std::size_t> override {
    // Highest ratio first (order_by sorts ascending, stably).
    return order_by(v.waiting, [&](const request_view& r) {
      return -((v.now_s - r.arrival_s + 1.0) / (1.0 + r.num_prompt_tokens));
    });
  }

  auto preemption_victim(const schedule_view& v) -> std::size_t override {
    std::size_t victim = 0;
    for (std::size_t i = 1; i < v.running.size(); ++i)
      if (v.running[i].max_tokens - v.running[i].num_output_tokens >=
          v.running[victim].max_tokens - v.running[victim].num_output_tokens)
        victim = i;
    return victim;
  }
};

} // namespace

extern "C" int troupe_policy_abi_version() { return EXAMPLE_ABI_VERSION; }
extern "C" scheduling_policy* troupe_make_scheduling_policy() { return new longest_wait_first; }
