#pragma once
// Atoms, and the message types CAF may carry. Those a remote replica
// exchanges have serializers (actors/inspect.hpp); the rest never leave the
// process and are whitelisted as local-only.

#include "actors/inspect.hpp"
#include "actors/messages.hpp"
#include "engine/core/batch_scheduler.hpp"
#include "engine/core/memory_manager.hpp"
#include "engine/core/router_core.hpp"
#include "policies/api/routing.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/type_id.hpp>

CAF_ADD_ATOM(troupe, troupe, encode_atom, "encode")
CAF_ADD_ATOM(troupe, troupe, execute_atom, "execute")
CAF_ADD_ATOM(troupe, troupe, lease_atom, "lease")
CAF_ADD_ATOM(troupe, troupe, apply_atom, "apply")
CAF_ADD_ATOM(troupe, troupe, match_atom, "match")
CAF_ADD_ATOM(troupe, troupe, refill_atom, "refill")
CAF_ADD_ATOM(troupe, troupe, submit_atom, "submit")
CAF_ADD_ATOM(troupe, troupe, place_atom, "place")
CAF_ADD_ATOM(troupe, troupe, admitted_atom, "admitted")
CAF_ADD_ATOM(troupe, troupe, abort_atom, "abort")
CAF_ADD_ATOM(troupe, troupe, tokens_atom, "tokens")
CAF_ADD_ATOM(troupe, troupe, gone_atom, "gone")
CAF_ADD_ATOM(troupe, troupe, step_atom, "step")
CAF_ADD_ATOM(troupe, troupe, dispatch_atom, "dispatch")
CAF_ADD_ATOM(troupe, troupe, device_atom, "device")
CAF_ADD_ATOM(troupe, troupe, load_atom, "load")
CAF_ADD_ATOM(troupe, troupe, probe_atom, "probe")
CAF_ADD_ATOM(troupe, troupe, join_atom, "join")
CAF_ADD_ATOM(troupe, troupe, drain_atom, "drain")
CAF_ADD_ATOM(troupe, troupe, tick_atom, "tick")
CAF_ADD_ATOM(troupe, troupe, checked_atom, "checked")
CAF_ADD_ATOM(troupe, troupe, timeout_atom, "timeout")
CAF_ADD_ATOM(troupe, troupe, status_atom, "status")
CAF_ADD_ATOM(troupe, troupe, evacuate_atom, "evacuate")
CAF_ADD_ATOM(troupe, troupe, fault_atom, "fault")
CAF_ADD_ATOM(troupe, troupe, fleet_atom, "fleet")
CAF_ADD_ATOM(troupe, troupe, scale_atom, "scale")
CAF_ADD_ATOM(troupe, troupe, started_atom, "started")
CAF_ADD_ATOM(troupe, troupe, rsubmit_atom, "rsubmit")
CAF_ADD_ATOM(troupe, troupe, hello_atom, "hello")

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::encode_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::encoded)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::step_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::step_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::steady_time)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::delivery_count)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::block_op>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::policy::route_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::fleet_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::started_replica)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::placement)
