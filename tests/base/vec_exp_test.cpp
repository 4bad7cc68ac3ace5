#include "base/vec_exp.hpp"

#include <doctest/doctest.h>

#include <cmath>

TEST_CASE("fast_exp follows exp across the float range") {
  double worst = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.00731f) {
    const double want = std::exp(static_cast<double>(x));
    const double err = std::abs(troupe::fast_exp(x) - want) / want;
    worst = std::max(worst, err);
  }
  CHECK(worst < 3e-7);
  CHECK(troupe::fast_exp(0.0f) == 1.0f);
  CHECK(troupe::fast_exp(-1000.0f) < 2e-38f);
  CHECK(troupe::fast_exp(-1000.0f) >= 0.0f);
  CHECK(std::isfinite(troupe::fast_exp(1000.0f)));
}
