#include "engine/cpu/threads.hpp"

#include <cblas.h>
#include <omp.h>
#include <algorithm>
#include <thread>

namespace troupe {

auto resolve_threads(int n) -> int {
  if (n > 0) return n;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void set_cpu_threads(int n) {
  n = resolve_threads(n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

} // namespace troupe
