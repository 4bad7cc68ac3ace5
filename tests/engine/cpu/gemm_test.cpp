// Every shape and dtype of gemm against a double-precision product.

#include "engine/cpu/gemm.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/sampling/rng.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace troupe;

namespace {

// Random weights stored as `type`, and their exact F32 values.
void make_weights(dtype type, std::int64_t count, rng& r, std::vector<std::byte>& bytes,
                  std::vector<float>& exact) {
  bytes.resize(static_cast<std::size_t>(count) * dtype_size(type));
  exact.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto v = static_cast<float>(r.normal());
    auto* dst = bytes.data() + static_cast<std::size_t>(i) * dtype_size(type);
    if (type == dtype::f32) {
      std::memcpy(dst, &v, 4);
    } else {
      const std::uint16_t h = type == dtype::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(dst, &h, 2);
    }
    exact[static_cast<std::size_t>(i)] = load_as_f32(type, bytes.data(), static_cast<std::size_t>(i));
  }
}

} // namespace

TEST_CASE("gemm equals the exact product for every shape and dtype") {
  rng r(17);
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
      for (int trial = 0; trial < 40; ++trial) {
        // m crosses the 16- and 32-row panels, n the micro-tiles, k the
        // 16-wide vectors and the 256-column widening chunks.
        const std::int64_t m = trial < 4 ? 1 : 1 + static_cast<std::int64_t>(r.next() % 70);
        const std::int64_t n = 1 + static_cast<std::int64_t>(r.next() % 40);
        const std::int64_t k = 1 + static_cast<std::int64_t>(r.next() % 600);
        CAPTURE(threads);
        CAPTURE(dtype_name(type));
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        std::vector<float> x(static_cast<std::size_t>(m * k)), exact, y(static_cast<std::size_t>(m * n), NAN);
        for (auto& v : x) v = static_cast<float>(r.normal());
        std::vector<std::byte> w;
        make_weights(type, n * k, r, w, exact);
        gemm(x.data(), m, w.data(), type, n, k, y.data());
        double worst = 0.0;
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double want = 0.0, scale = 0.0;
            for (std::int64_t c = 0; c < k; ++c) {
              const double p = static_cast<double>(x[static_cast<std::size_t>(i * k + c)]) *
                               exact[static_cast<std::size_t>(j * k + c)];
              want += p;
              scale += std::abs(p);
            }
            // F32 accumulation: error bounded by a few ulps of Σ|terms|.
            worst = std::max(worst, std::abs(y[static_cast<std::size_t>(i * n + j)] - want) / (scale + 1e-30));
          }
        CHECK(worst < 1e-5);
      }
    }
  }
}

TEST_CASE("several jobs in one pass equal separate products") {
  rng r(5);
  const std::int64_t k = 77;
  std::vector<std::byte> wa, wb;
  std::vector<float> ea, eb;
  make_weights(dtype::f32, 13 * k, r, wa, ea);
  make_weights(dtype::bf16, 6 * k, r, wb, eb);
  set_cpu_threads(2);
  for (std::int64_t m : {1, 5, 40}) {
    CAPTURE(m);
    std::vector<float> x(static_cast<std::size_t>(m * k));
    for (auto& v : x) v = static_cast<float>(r.normal());
    std::vector<float> ya(static_cast<std::size_t>(m * 13)), yb(static_cast<std::size_t>(m * 6));
    std::vector<float> sa(ya.size()), sb(yb.size());
    const matmul_job jobs[] = {{wa.data(), dtype::f32, 13, ya.data()}, {wb.data(), dtype::bf16, 6, yb.data()}};
    gemm_multi(x.data(), m, k, jobs);
    gemm(x.data(), m, wa.data(), dtype::f32, 13, k, sa.data());
    gemm(x.data(), m, wb.data(), dtype::bf16, 6, k, sb.data());
    CHECK(ya == sa);
    CHECK(yb == sb);
  }
}
