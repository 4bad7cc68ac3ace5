#pragma once
// The routing seam: the server's routing policies (policies/routing/) pick
// each request's replica from a view of the replicas the simulator builds
// (their load, and how much of the request's prompt each caches).

#include "policies/api/routing.hpp"
#include "sim/workload.hpp"

#include <cstddef>

namespace troupe::sim {

/// The session key of a request: its conversation's, as the server hashes
/// x-session-id or the conversation's opening; a lone request is a session
/// of its own (as its unique opening makes it in the server).
inline auto session_of(const sim_request& r) -> policy::route_request {
  policy::route_request q;
  q.has_session = true;
  q.session = r.conversation >= 0 ? static_cast<std::uint64_t>(r.conversation)
                                  : (std::uint64_t{1} << 63) | static_cast<std::uint64_t>(r.index);
  q.prompt_tokens = r.prompt_tokens;
  q.max_tokens = r.output_tokens;
  return q;
}

} // namespace troupe::sim
