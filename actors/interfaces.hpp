#pragma once
// Every typed actor interface of troupe, in one place. A request's path:
// gateway (HTTP threads) → its sink → tokenizer; sink → router (its one
// dispatch: the devices' prefix probes, the routing policy) → the replica's
// scheduler ⇄ executor; tokens flow back scheduler → sink → client.

#include "actors/type_ids.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace troupe {

/// One live request: asks for its tokens, receives them step by step,
/// detokenizes and writes them to its client.
using sink_actor = caf::typed_actor<
    /// New tokens (zero or one) and, on the last, the finish reason.
    caf::reacts_to<tokens_atom, request_update>,
    /// The client went away: abort and quit.
    caf::reacts_to<gone_atom>,
    /// Its dispatch's admission, from the replica's scheduler itself (request
    /// id; the placement: the admission, the replica and its scheduler, or
    /// failed: out of rotation, or gone before it answered). Sent before
    /// any of the request's tokens.
    caf::reacts_to<admitted_atom, request_id, placement>>;

/// One of the tokenizer pool: renders chat templates and encodes prompts.
using tokenizer_actor = caf::typed_actor<
    /// Prompt tokens (BOS included) or an error line.
    caf::replies_to<encode_atom, encode_job>::with<encoded>>;

/// Runs steps on one device; owns the model and its KV cache.
using executor_actor = caf::typed_actor<
    /// Runs one step (blocking this actor's own thread) and returns its samples.
    caf::replies_to<execute_atom, step_ptr>::with<step_result>>;

/// Owns one device's KV blocks and prefix cache (engine/core/memory_manager):
/// grants leases of free blocks to schedulers, matches prompts once at
/// admission, and takes their publishes and releases in batches.
using memory_manager_actor = caf::typed_actor<
    /// Up to n blocks for a lease (free first, then evicted from the cache).
    caf::replies_to<lease_atom, std::int32_t>::with<std::vector<block_id>>,
    /// The cached blocks of a prompt's prefix (tenant, tokens, block size,
    /// priority), each referenced for the request.
    caf::replies_to<match_atom, std::uint64_t, std::vector<token_id>, std::int32_t, std::int32_t>::with<
        std::vector<block_id>>,
    /// A lease holder's publishes and releases since its last report.
    caf::reacts_to<apply_atom, std::vector<block_op>>,
    /// How many of a prompt's leading blocks the cache holds (tenant, tokens,
    /// block size), taking nothing: what prefix-affine routing weighs.
    caf::replies_to<probe_atom, std::uint64_t, std::vector<token_id>, std::int32_t>::with<std::int32_t>>;

/// One replica's continuous-batching loop over its executor.
using scheduler_actor = caf::typed_actor<
    /// Queues a request whose tokens go to the sink; arrival is when the
    /// gateway read it (for the queue-time metric); the count is of token
    /// messages sent to the sink whose text has not yet reached the client's
    /// connection (the scheduler adds, the connection subtracts).
    caf::replies_to<submit_atom, request, sink_actor, steady_time, delivery_count>::with<admission>,
    /// The same, placed by the router as replica i: the answer goes to the
    /// sink itself (admitted_atom), not back to the router.
    caf::reacts_to<place_atom, request, sink_actor, steady_time, delivery_count, std::int32_t>,
    /// Ends a request now and frees its blocks (client gone, stop string).
    caf::reacts_to<abort_atom, request_id>,
    /// Internal: runs the next step.
    caf::reacts_to<step_atom>,
    /// Internal: asks for more leased blocks when few are left.
    caf::reacts_to<refill_atom>,
    /// Out of rotation (failed health checks): ends every request it holds
    /// with finish_reason::error, so that their sinks retry them elsewhere.
    caf::reacts_to<evacuate_atom>,
    /// Fault injection (the admin API, for tests): "hang" stops stepping as
    /// a stuck device would, "recover" resumes, "crash" ends the actor.
    caf::reacts_to<fault_atom, std::string>>;

/// Chooses each request's replica with the configured routing policy, from
/// the replicas' load reports and what it routed since (engine/core/router_core).
using router_actor = caf::typed_actor<
    /// A request's dispatch (its first choice's submission): the router
    /// weighs the replicas (for a policy that reads them, and `probe`, each
    /// device's prefix cache first says how much of the prompt it holds),
    /// avoiding the replicas listed (where it just failed), and places it
    /// at that replica's scheduler, which answers the sink itself
    /// (admitted_atom). The router's answer is where it went (no replica
    /// ready: admission.no_replica), sent after the placement, so no abort
    /// the sink sends there can overtake it.
    caf::replies_to<dispatch_atom, request, policy::route_request, std::vector<std::int32_t>, bool, sink_actor,
                    steady_time, delivery_count>::with<placement>,
    /// Replica i's device's memory manager, whose prefix cache a dispatch probes.
    caf::reacts_to<device_atom, std::int32_t, memory_manager_actor>,
    /// A replica's load after its step.
    caf::reacts_to<load_atom, std::int32_t, replica_report>,
    /// Replica i is loaded and is this scheduler: into rotation, or (true)
    /// joined but drained, out of rotation from the start (the warm pool;
    /// a join then a drain would let requests in between); the router
    /// monitors it (death: out) and checks it every interval. The last
    /// flag: it runs on a worker (a proxy stands for it here), so the router
    /// records its metrics series from its load reports.
    caf::reacts_to<join_atom, std::int32_t, scheduler_actor, bool, bool>,
    /// A new replica slot (a remote worker's): its index, in rotation once it joins.
    caf::replies_to<join_atom>::with<std::int32_t>,
    /// Replica i drains (true: no new requests) or resumes (false).
    caf::reacts_to<drain_atom, std::int32_t, bool>,
    /// Every replica's health and load, as a JSON array (the admin API).
    caf::replies_to<status_atom>::with<std::string>,
    /// Every replica's health and load (the autoscaler).
    caf::replies_to<fleet_atom>::with<fleet_snapshot>,
    /// Passes a fault to replica i's scheduler (the admin API).
    caf::reacts_to<fault_atom, std::int32_t, std::string>,
    /// Internal: starts the interval's deep checks.
    caf::reacts_to<tick_atom>,
    /// Internal: a check's outcome (replica, check number, passed).
    caf::reacts_to<checked_atom, std::int32_t, std::uint64_t, bool>,
    /// Internal: a check unanswered at its timeout (replica, check number).
    caf::reacts_to<timeout_atom, std::int32_t, std::uint64_t>>;

/// Sizes one model's fleet (actors/autoscaler_actor.hpp).
using autoscaler_actor = caf::typed_actor<
    /// Internal: the interval's decision.
    caf::reacts_to<tick_atom>,
    /// Internal: a cold start finished (or failed); true when taken (an
    /// error or false: the starter stops what it started).
    caf::replies_to<started_atom, started_replica>::with<bool>,
    /// Its last decision and every replica's state, as JSON (the admin API).
    caf::replies_to<status_atom>::with<std::string>>;

// Replicas on other machines (actors/wire.hpp): the worker's endpoint, the
// router node's door and the remote replica's local stand-in.

/// On the worker: one replica's side of the wire. Submissions come with
/// their age (clocks differ between machines); tokens go back to whoever
/// submitted. It is its local scheduler's sink for every remote request.
using endpoint_actor = caf::typed_actor<
    caf::replies_to<rsubmit_atom, request, std::int64_t>::with<admission>,
    caf::reacts_to<abort_atom, request_id>,
    caf::reacts_to<evacuate_atom>,
    caf::reacts_to<fault_atom, std::string>,
    caf::reacts_to<tokens_atom, request_update>,
    caf::reacts_to<gone_atom>>;

/// On the router node, published at router.worker_port: where workers join.
/// A worker proves it knows the fleet's secret (router.worker_secret_file)
/// before it gets anything: a stranger who reaches the port learns nothing
/// and reaches no actor but this one.
using door_actor = caf::typed_actor<
    /// A challenge: a fresh nonce (hex), good for one join within a minute.
    caf::replies_to<hello_atom>::with<std::string>,
    /// A worker asks for a replica of this model, with a challenge it was
    /// given and its proof (worker_proof): the replica's index, the router
    /// (its load reports' address) and a ticket for the replica's endpoint;
    /// or an error (wrong proof, unknown model: naming the served ones).
    caf::replies_to<join_atom, std::string, std::string, std::string>::with<std::int32_t, router_actor,
                                                                          std::string>,
    /// The replica (index, model) is loaded: here is its endpoint, with the
    /// ticket its join got (one use).
    caf::reacts_to<join_atom, std::int32_t, std::string, endpoint_actor, std::string>>;

/// The remote replica's stand-in on the router node.
using proxy_actor = scheduler_actor::extend<caf::reacts_to<tokens_atom, request_update>>;

} // namespace troupe
