#include "engine/cpu/threads.hpp"

#include <cblas.h>
#include <omp.h>
#include <thread>

namespace troupe {

void set_cpu_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

} // namespace troupe
