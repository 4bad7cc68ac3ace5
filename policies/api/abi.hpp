#pragma once
// The version of policies/api/: a policy built as a shared object reports the
// version it was compiled against, and troupe refuses one that differs.

namespace troupe::policy {

/// Bumped whenever a view, decision or interface in policies/api/ changes.
inline constexpr int abi_version = 3;

} // namespace troupe::policy
