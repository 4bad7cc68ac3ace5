#pragma once
// One request's life, from its parsed body to its last byte, as plain C++:
// a state machine the sink actor drives. Each event (the prompt encoded, a
// replica chosen, the submission admitted, tokens, a replica failed, the
// client gone) returns the effects to carry out (encode, dispatch, submit,
// write, respond, abort, observe, quit), in order. No CAF, no clock: time
// comes in with the events, so a test scripts a request's whole life.

#include "engine/core/batch_scheduler.hpp"
#include "engine/core/request.hpp"
#include "policies/api/routing.hpp"
#include "service/request/choice_group.hpp"
#include "service/request/generation_request.hpp"
#include "service/request/wire_encoder.hpp"
#include "service/request/request_messages.hpp"
#include "service/request/model_profile.hpp"
#include "service/tenancy/response_cache.hpp"
#include "service/tenancy/response_store.hpp"
#include "service/tenancy/tenants.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::api {
class reasoning_seal;
} // namespace troupe::api

namespace troupe {

using header_list = std::vector<std::pair<std::string, std::string>>;

/// What the gateway knows of a request when it hands it to its session.
struct session_request {
  api::generation_request body;
  std::string request_id;       ///< the x-request-id echoed on the response
  header_list headers;          ///< sent with every response
  steady_time arrival;
  std::int64_t created = 0;     ///< Unix seconds: the response's `created`
  /// The session key's hash (x-session-id, else the OpenAI `user`, else the
  /// conversation's first messages), for session-affine routing.
  bool has_session = false;
  std::uint64_t session = 0;
  /// A capability route: the small model's profile comes first; once the
  /// prompt is encoded the session asks for the large one when the rule
  /// (prompt length, max_tokens, tier) says so.
  std::optional<capability_split> route;
  std::string tier; ///< x-troupe-tier
  std::shared_ptr<const api::reasoning_seal> seal; ///< the server's key for sealed reasoning

  // The tenant (a tenants file configured; else the defaults below).
  std::shared_ptr<tenant_ticket> ticket; ///< its hold on the tenant: released when the session ends
  std::string tenant = "default";        ///< the metrics' tenant label
  /// The prefix-cache namespace and vtc account (hashes), the vtc weight and
  /// the priority. Without tenants: the namespace is the OpenAI `user`, the
  /// account 0 (the namespace's), and the priority the request's own.
  std::optional<std::uint64_t> cache_namespace;
  std::uint64_t account = 0;
  double weight = 1.0;
  std::optional<std::int32_t> priority;
  std::int32_t max_input_tokens = 0; ///< > 0: a longer prompt gets 400
  /// The response cache, for a cacheable request of a tenant that opted in.
  response_cache* cache = nullptr;
  sha256_digest cache_key{};
  /// The wire protocol it came through: its errors' shape and its answer's
  /// encoders (never null).
  std::shared_ptr<const api::wire_protocol> protocol;
  /// A Responses request with store: true: the store, the tenant's name in
  /// it, and the conversation to keep with the answer.
  response_store* responses = nullptr;
  std::string store_tenant;
  std::vector<chat_message> conversation;
};

/// What a session asks its driver to do.
namespace effect {
struct encode { encode_job job; };            ///< on the tokenizer pool; answer on_encoded
struct choose_model { bool small = true; };   ///< a capability route's choice; answer on_model
/// The request's first choice `r` to a replica (the router picks it;
/// `probe`: each device's prefix cache is asked first), avoiding the
/// replicas listed: answer on_routed, then on_admitted (or
/// on_replica_failed); or on_no_replica.
struct dispatch {
  request r;
  policy::route_request route;
  std::vector<std::int32_t> avoid;
  bool probe = true;
};
/// A further choice (n > 1, best_of) to the replica the first went to,
/// once it was admitted there: answer on_admitted (or on_replica_failed).
struct submit { request r; std::int32_t replica = -1; };
struct start_stream { header_list headers; };  ///< the 200 and its headers (SSE)
struct write { std::string text; };            ///< more of the stream
struct end_stream {};                          ///< after the last write
struct respond { int status = 200; header_list headers; std::string body; };
struct abort { request_id id = 0; };           ///< at the current replica
/// A figure for the metrics: the tenant's series (ttft, itl, tpot, e2e,
/// tokens, success by reason, cache hits) or the model's (failure, retry).
struct observe {
  enum class what { ttft, itl, tpot, e2e, prompt_tokens, generation_tokens, success, failure, retry, cache_hit,
                    cache_miss };
  what kind;
  double value = 0;
  finish_reason reason = finish_reason::none;
};
struct quit {};                                ///< the session is over
} // namespace effect

using session_effect = std::variant<effect::encode, effect::choose_model, effect::dispatch, effect::submit,
                                    effect::start_stream, effect::write, effect::end_stream, effect::respond,
                                    effect::abort, effect::observe, effect::quit>;
using effects = std::vector<session_effect>;

namespace session_detail {
inline auto seconds(steady_time t) -> double { return std::chrono::duration<double>(t.time_since_epoch()).count(); }
inline auto between(steady_time a, steady_time b) -> double { return std::chrono::duration<double>(b - a).count(); }
inline auto observe(effect::observe::what kind, double value = 0, finish_reason reason = finish_reason::none)
    -> session_effect {
  return effect::observe{kind, value, reason};
}
inline void append(effects& to, effects more) {
  for (auto& e : more) to.push_back(std::move(e));
}
} // namespace session_detail

class request_session {
public:
  enum class phase { received, encoding, routing, admitting, streaming, finished, failed };

  /// `ids` hands out request ids, `count` consecutive ones at a time;
  /// `stopping` (may be null) is set once the server is past its drain
  /// timeout (a replica failure then is the shutdown's).
  request_session(std::shared_ptr<const model_profile> model, session_request req,
                  std::function<request_id(std::int32_t count)> ids, const std::atomic<bool>* stopping = nullptr);

  /// The request arrives: a cached answer replayed, a refusal, or its prompt to encode.
  auto start(steady_time now) -> effects;
  auto on_encoded(encoded& e, steady_time now) -> effects;
  /// A capability route's model (the profile it chose; the same or another).
  auto on_model(std::shared_ptr<const model_profile> model, steady_time now) -> effects;
  /// The dispatch went to replica `replica` (its admission follows).
  auto on_routed(std::int32_t replica, steady_time now) -> effects;
  auto on_no_replica(steady_time now) -> effects;
  /// The replica's answer to choice `choice`'s submission.
  auto on_admitted(std::int32_t replica, std::size_t choice, const admission& a, steady_time now) -> effects;
  auto on_tokens(const request_update& u, steady_time now) -> effects;
  /// Replica `replica` died, hangs or refused (a stale one is ignored).
  auto on_replica_failed(std::int32_t replica, steady_time now) -> effects;
  auto on_client_gone(steady_time now) -> effects;
  /// An actor it asked is gone: the server is shutting down.
  auto on_shutdown(steady_time now) -> effects;

  auto current_phase() const -> phase { return phase_; }
  auto done() const -> bool { return phase_ == phase::finished || phase_ == phase::failed; }
  auto model() const -> const model_profile& { return *model_; }
  auto tenant() const -> const std::string& { return req_.tenant; }
  auto arrival() const -> steady_time { return req_.arrival; }
  /// Its requests at the replica now: ids first_id() on, num_choices() of them.
  auto first_id() const -> request_id { return id_; }
  auto num_choices() const -> std::int32_t { return static_cast<std::int32_t>(choices_.size()); }
  auto replica() const -> std::int32_t { return replica_; }

private:
  auto fail(api::api_error e, steady_time now) -> effects;
  auto admit(encoded& e, steady_time now) -> effects;
  auto build_request(encoded& e, std::int64_t n) -> request;
  void open_outputs();
  auto replica_failed(steady_time now) -> effects;
  auto echo(std::size_t i, const request_update& u, std::string& batch, steady_time now) -> std::optional<effects>;
  auto add_token(std::size_t i, const sample_result& s, std::string& batch) -> finish_reason;
  auto end_choice(std::size_t i, finish_reason reason, std::string batch, steady_time now) -> effects;
  auto finish(finish_reason reason, std::string batch, steady_time now) -> effects;
  auto replay(const cached_response& hit, steady_time now) -> effects;
  void start_stream(effects& fx);
  void settle(steady_time now);
  auto prompt_limit() const -> std::int64_t;
  auto prompt_param() const -> const char*;
  auto encode_job_of() -> encode_job;

  std::shared_ptr<const model_profile> model_;
  session_request req_;
  std::function<request_id(std::int32_t)> ids_;
  const std::atomic<bool>* stopping_ = nullptr;
  phase phase_ = phase::received;
  choice_group choices_;
  request_id id_ = 0;        ///< the first choice's (the others' follow it)
  std::int32_t replica_ = -1;
  request original_;         ///< the first choice's request, as first built: what a retry submits again
  policy::route_request route_;
  std::vector<std::int32_t> failed_; ///< replicas that failed it (avoided on retry)
  std::int32_t retries_ = 0;
  bool stream_started_ = false, settled_ = false;
  encode_job job_;           ///< kept for a capability route, which may encode again
  bool route_decided_ = false;
  std::optional<encoded> pending_; ///< the small model's encoding, while the route's model is chosen
  std::string echo_text_;    ///< with echo: the prompt's text, sent before the first token's
  steady_time first_token_{}, last_token_{};
  std::vector<std::string> pieces_; ///< the text per token, kept for the response cache
  std::shared_ptr<grammar::compiled_grammar> grammar_; ///< its grammar, compiled, held while it runs
};

} // namespace troupe
