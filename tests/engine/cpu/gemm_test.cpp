// Every shape and dtype of gemm against a double-precision product.

#include "engine/cpu/gemm.hpp"
#include "engine/cpu/threads.hpp"
#include "base/rng.hpp"

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
        // m crosses the small-batch kernel, the 16- and 32-row panels, n the
        // 16-row groups and micro-tiles, k the 256-column widening chunks.
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
        // Both layouts; trials alternate.
        const auto layout = trial % 2 == 0 ? weight_layout::packed16 : weight_layout::row_major;
        CAPTURE(static_cast<int>(layout));
        std::vector<std::byte> packed(packed16_bytes(type, n, k));
        pack16(w.data(), type, n, k, packed.data());
        gemm(x.data(), m, layout == weight_layout::packed16 ? packed.data() : w.data(), type, n, k, y.data(), layout);
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

TEST_CASE("a row's product is bitwise the same alone, in any batch, at any position, in either layout, on any thread count") {
  // Batch invariance: every kernel (the packed16 one for up to 16 rows, the
  // panel one past that, the row-major fallback) sums each output in one
  // order, so x's row i gives the same bits whatever rows surround it.
  rng r(29);
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (int trial = 0; trial < 12; ++trial) {
      const std::int64_t m = 2 + static_cast<std::int64_t>(r.next() % 70);
      const std::int64_t n = trial % 4 == 0 ? 16 * (1 + static_cast<std::int64_t>(r.next() % 8))
                                            : 1 + static_cast<std::int64_t>(r.next() % 90);
      const std::int64_t k = 1 + static_cast<std::int64_t>(r.next() % 700);
      CAPTURE(dtype_name(type));
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      std::vector<float> x(static_cast<std::size_t>(m * k)), exact;
      for (auto& v : x) v = static_cast<float>(r.normal());
      std::vector<std::byte> w;
      make_weights(type, n * k, r, w, exact);
      std::vector<std::byte> packed(packed16_bytes(type, n, k));
      pack16(w.data(), type, n, k, packed.data());
      for (std::int64_t row = 0; row < n; ++row)
        for (std::int64_t c = 0; c < k; c += 7)
          REQUIRE(packed16_at(packed.data(), type, k, row, c) == exact[static_cast<std::size_t>(row * k + c)]);

      set_cpu_threads(1 + trial % 2);
      std::vector<float> batched(static_cast<std::size_t>(m * n));
      gemm(x.data(), m, packed.data(), type, n, k, batched.data(), weight_layout::packed16);
      set_cpu_threads(2 - trial % 2);
      std::vector<float> row_major(batched.size());
      gemm(x.data(), m, w.data(), type, n, k, row_major.data(), weight_layout::row_major);
      CHECK(std::memcmp(row_major.data(), batched.data(), batched.size() * sizeof(float)) == 0);
      // Each row alone, and inside a random sub-batch (rows repeated and
      // shuffled), in both layouts.
      std::vector<float> alone(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < m; ++i) {
        const auto layout = i % 2 == 0 ? weight_layout::packed16 : weight_layout::row_major;
        gemm(x.data() + i * k, 1, layout == weight_layout::packed16 ? packed.data() : w.data(), type, n, k,
             alone.data(), layout);
        CHECK(std::memcmp(alone.data(), batched.data() + i * n, static_cast<std::size_t>(n) * sizeof(float)) == 0);
      }
      for (std::int64_t sub : {2 + static_cast<std::int64_t>(r.next() % 15), 17 + static_cast<std::int64_t>(r.next() % 60)}) {
        std::vector<std::int64_t> pick(static_cast<std::size_t>(sub));
        std::vector<float> xs(static_cast<std::size_t>(sub * k)), ys(static_cast<std::size_t>(sub * n));
        for (std::int64_t j = 0; j < sub; ++j) {
          pick[static_cast<std::size_t>(j)] = static_cast<std::int64_t>(r.next() % static_cast<std::uint64_t>(m));
          std::memcpy(xs.data() + j * k, x.data() + pick[static_cast<std::size_t>(j)] * k,
                      static_cast<std::size_t>(k) * sizeof(float));
        }
        gemm(xs.data(), sub, packed.data(), type, n, k, ys.data(), weight_layout::packed16);
        for (std::int64_t j = 0; j < sub; ++j)
          CHECK(std::memcmp(ys.data() + j * n, batched.data() + pick[static_cast<std::size_t>(j)] * n,
                            static_cast<std::size_t>(n) * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("every batch size from 1 to 40 gives each row the bits it has alone") {
  // Every kernel and every remainder (rows of x left after full blocks of
  // 8, panels of 16 and 32), in both layouts and every dtype.
  rng r(41);
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    const std::int64_t n = 53, k = 37;
    std::vector<float> x(static_cast<std::size_t>(40 * k)), exact;
    for (auto& v : x) v = static_cast<float>(r.normal());
    std::vector<std::byte> w;
    make_weights(type, n * k, r, w, exact);
    std::vector<std::byte> packed(packed16_bytes(type, n, k));
    pack16(w.data(), type, n, k, packed.data());
    std::vector<float> alone(static_cast<std::size_t>(40 * n));
    for (std::int64_t i = 0; i < 40; ++i)
      gemm(x.data() + i * k, 1, packed.data(), type, n, k, alone.data() + i * n, weight_layout::packed16);
    for (std::int64_t m = 1; m <= 40; ++m)
      for (const auto layout : {weight_layout::packed16, weight_layout::row_major}) {
        CAPTURE(dtype_name(type));
        CAPTURE(m);
        CAPTURE(static_cast<int>(layout));
        std::vector<float> y(static_cast<std::size_t>(m * n));
        gemm(x.data(), m, layout == weight_layout::packed16 ? packed.data() : w.data(), type, n, k, y.data(), layout);
        CHECK(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)) == 0);
      }
  }
}
