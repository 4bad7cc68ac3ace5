#pragma once

namespace troupe {

/// Sets the threads used by the CPU backend (OpenMP loops and OpenBLAS).
/// n <= 0 means one per core.
void set_cpu_threads(int n);

} // namespace troupe
