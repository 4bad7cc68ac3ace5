#pragma once
// Plain identifiers shared by every layer of the engine.

#include <cstdint>

namespace troupe {

/// A vocabulary index. Negative values never name a token.
using token_id = std::int32_t;

/// Identifies one request for its whole life, unique within a server run.
using request_id = std::uint64_t;

/// Index of one KV-cache block in a device's block pool.
using block_id = std::int32_t;

} // namespace troupe
