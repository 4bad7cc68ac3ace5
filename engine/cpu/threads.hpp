#pragma once

namespace troupe {

/// n, or for n <= 0 one per core (at least 1): how every thread-count
/// setting of troupe reads 0.
auto resolve_threads(int n) -> int;

/// Sets the threads used by the CPU backend (OpenMP loops and OpenBLAS).
/// n <= 0 means one per core.
void set_cpu_threads(int n);

} // namespace troupe
