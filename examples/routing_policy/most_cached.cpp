// An out-of-tree routing policy: built as a shared object against
// policies/api/ alone, loaded by troupe by path. It sends a request to the
// ready replica that caches the most of its prompt, the one with the fewest
// requests among equals; a prompt no replica caches goes to the ready
// replicas in turn. It declares that it reads cached_blocks, so the
// server and the simulator count each prompt's cached blocks for it.
//
//   c++ -std=c++20 -shared -fPIC -I<troupe source> most_cached.cpp -o libmost_cached.so
//   troupe serve --set router.policy=$PWD/libmost_cached.so

#include "policies/api/plugin.hpp"

namespace {

using namespace troupe::policy;

class most_cached final : public routing_policy {
public:
  auto name() const -> std::string_view override { return "most_cached"; }
  auto reads_cached_blocks() const -> bool override { return true; }

  auto route(const route_view& v) -> std::size_t override {
    std::size_t best = no_replica, ready = 0;
    for (std::size_t i = 0; i < v.replicas.size(); ++i) {
      const auto& r = v.replicas[i];
      if (!r.ready) continue;
      ++ready;
      if (best == no_replica) {
        best = i;
        continue;
      }
      const auto& b = v.replicas[best];
      if (r.cached_blocks > b.cached_blocks || (r.cached_blocks == b.cached_blocks && r.requests() < b.requests()))
        best = i;
    }
    if (best == no_replica || v.replicas[best].cached_blocks > 0) return best;
    // Nothing cached anywhere: the next ready replica in turn.
    std::size_t k = turn_++ % ready;
    for (std::size_t i = 0; i < v.replicas.size(); ++i)
      if (v.replicas[i].ready && k-- == 0) return i;
    return best;
  }

private:
  std::size_t turn_ = 0;
};

} // namespace

extern "C" int troupe_policy_abi_version() { return troupe::policy::abi_version; }
extern "C" routing_policy* troupe_make_routing_policy() { return new most_cached; }
