#pragma once
// What a parsed request is known by besides its id: its session (the same
// for every turn of a conversation, so that a canary keeps the sessions it
// takes) and, when its answer is deterministic, its response-cache text.
// Plain C++, like openai_api.hpp.

#include "service/request/api_error.hpp"
#include "service/request/generation_request.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::api {

/// The session key: a session header (`session`: x-session-id, else Claude
/// Code's x-claude-code-session-id), else the client's prompt_cache_key,
/// else the user (OpenAI's user, Anthropic's metadata.user_id), else the
/// conversation's opening (its messages up to the first user message, which
/// every later turn repeats; or the prompt's start), hashed.
auto session_key(const generation_request& r, const std::string& session) -> std::uint64_t;

/// What makes a deterministic request's answer: every field that shapes it,
/// after the model `version`. "" when the request is not cacheable (sampled
/// without a seed; logprobs; echo, whose prompt text the stored pieces do
/// not hold; several choices, which the cache keeps no room for).
auto canonical_request(const generation_request& r, const std::string& version) -> std::string;

} // namespace troupe::api
