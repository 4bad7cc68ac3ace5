#pragma once
// What a policy built out of tree as a shared object exports, with C linkage
// so that troupe finds it by name with dlsym. Build against policies/api/
// alone (see examples/scheduling_policy/) and name the .so's path in the
// config (`scheduler.policy = "/path/libmy_policy.so"`). troupe refuses a
// library whose troupe_policy_abi_version() differs from its own abi_version.
//
//   extern "C" int troupe_policy_abi_version() { return troupe::policy::abi_version; }
//   extern "C" troupe::policy::scheduling_policy* troupe_make_scheduling_policy() { return new my_policy; }
//
// (or troupe_make_eviction_policy for an eviction policy,
// troupe_make_routing_policy for a routing policy: `router.policy`). troupe owns the
// returned object and deletes it; the library stays loaded for the process.

#include "policies/api/abi.hpp"
#include "policies/api/eviction.hpp"
#include "policies/api/routing.hpp"
#include "policies/api/scheduling.hpp"

extern "C" {
using troupe_policy_abi_version_fn = int (*)();
using troupe_make_scheduling_policy_fn = troupe::policy::scheduling_policy* (*)();
using troupe_make_eviction_policy_fn = troupe::policy::eviction_policy* (*)();
using troupe_make_routing_policy_fn = troupe::policy::routing_policy* (*)();
}
