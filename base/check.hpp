#pragma once
// Invariant checks that stay on in every build: a broken invariant is a bug in
// troupe, never a user's mistake, and continuing would corrupt state.

#include <cstdio>
#include <cstdlib>

#define TROUPE_CHECK(cond, msg)                                                           \
  do {                                                                                    \
    if (!(cond)) [[unlikely]] {                                                           \
      std::fprintf(stderr, "%s:%d: invariant failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   msg);                                                                  \
      std::abort();                                                                       \
    }                                                                                     \
  } while (false)
