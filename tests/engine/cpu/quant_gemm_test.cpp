// quant_gemm against a double-precision product of the dequantized weights,
// on random shapes, every ISA path against the others bit for bit, and the
// batch invariance of the result.

#include "engine/cpu/quant_gemm.hpp"
#include "engine/cpu/quant_kernels.hpp"
#include "engine/cpu/threads.hpp"
#include "base/dtype.hpp"
#include "engine/formats/gguf_quant.hpp"
#include "base/rng.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace troupe;
using gguf::tensor_type;

namespace {

constexpr tensor_type all_types[] = {tensor_type::q8_0, tensor_type::q4_0, tensor_type::q4_k, tensor_type::q5_k,
                                     tensor_type::q6_k, tensor_type::mxfp4};

auto type_traits(tensor_type t) -> gguf::type_traits { return *gguf::traits(static_cast<std::uint32_t>(t)); }

// Activations are quantized in blocks of 32 for Q8_0/Q4_0 and 256 for the K-quants.
auto act_block(tensor_type t) -> std::int64_t {
  return t == tensor_type::q8_0 || t == tensor_type::q4_0 || t == tensor_type::mxfp4 ? 32 : 256;
}

// Where a block keeps its F16 scales (d, and dmin for Q4_K/Q5_K).
auto scale_offsets(tensor_type t) -> std::vector<std::int64_t> {
  switch (t) {
    case tensor_type::q4_k:
    case tensor_type::q5_k: return {0, 2};
    case tensor_type::q6_k: return {208};
    case tensor_type::mxfp4: return {}; // a byte, an exponent: random_mxfp4_scales
    default: return {0};
  }
}

// MXFP4's scale bytes in F16's range (mxfp4::exact_in_q8_0), and every
// seventh block all zeros (codes 0 and 8) under any scale byte, which the
// kernels must multiply as the zero-scale Q8_0 block it converts to.
void random_mxfp4_scales(std::vector<std::byte>& w, rng& r) {
  for (std::size_t blk = 0; blk < w.size() / 17; ++blk) {
    std::byte* p = w.data() + blk * 17;
    p[0] = static_cast<std::byte>(blk % 7 == 3 ? r.next() % 256 : 104 + r.next() % 40);
    if (blk % 7 == 3)
      for (int j = 1; j <= 16; ++j) p[j] &= std::byte{0x88};
  }
}

// n rows of k weights: quantize_row of normal values, or (Q5_K, which has no
// quantizer, and half the trials of the others) random bytes with finite
// scales of either sign, so that every bit of the quants is exercised.
auto make_weights(tensor_type t, std::int64_t n, std::int64_t k, bool random_bytes, rng& r)
    -> std::vector<std::byte> {
  const auto tr = type_traits(t);
  const std::int64_t row_bytes = k / tr.block_elements * tr.block_bytes;
  std::vector<std::byte> w(static_cast<std::size_t>(n * row_bytes));
  if (random_bytes || !gguf::can_quantize(t)) {
    for (auto& b : w) b = static_cast<std::byte>(r.next() & 0xFF);
    for (std::int64_t blk = 0; blk < n * k / tr.block_elements; ++blk)
      for (const auto off : scale_offsets(t)) {
        const float s = static_cast<float>((r.uniform() - 0.5) * 0.05);
        const std::uint16_t h = f32_to_f16(s);
        std::memcpy(w.data() + blk * tr.block_bytes + off, &h, 2);
      }
    if (t == tensor_type::mxfp4) random_mxfp4_scales(w, r);
  } else {
    std::vector<float> v(static_cast<std::size_t>(k));
    for (std::int64_t i = 0; i < n; ++i) {
      for (auto& x : v) x = static_cast<float>(r.normal() * 0.1);
      gguf::quantize_row(t, v.data(), w.data() + i * row_bytes, k);
    }
  }
  return w;
}

// The weights as floats (dequantize_row), and for Q4_K/Q5_K the magnitude of
// each value's min (the row dequantized with its quants zeroed): the float
// terms the kernel's rounding is relative to.
struct dequantized {
  std::vector<float> w, mins;
};

auto dequantize(tensor_type t, const std::vector<std::byte>& bytes, std::int64_t n, std::int64_t k) -> dequantized {
  const auto tr = type_traits(t);
  const std::int64_t row_bytes = k / tr.block_elements * tr.block_bytes;
  dequantized d;
  d.w.resize(static_cast<std::size_t>(n * k));
  d.mins.assign(static_cast<std::size_t>(n * k), 0.0f);
  std::vector<std::byte> zeroed = bytes;
  const bool has_mins = t == tensor_type::q4_k || t == tensor_type::q5_k;
  for (std::int64_t blk = 0; has_mins && blk < n * k / 256; ++blk)
    std::memset(zeroed.data() + blk * tr.block_bytes + 16, 0, static_cast<std::size_t>(tr.block_bytes - 16));
  for (std::int64_t i = 0; i < n; ++i) {
    gguf::dequantize_row(t, bytes.data() + i * row_bytes, d.w.data() + i * k, k);
    if (has_mins) gguf::dequantize_row(t, zeroed.data() + i * row_bytes, d.mins.data() + i * k, k);
  }
  return d;
}

auto random_x(std::int64_t m, std::int64_t k, rng& r) -> std::vector<float> {
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = static_cast<float>(r.normal());
  // Some rows and blocks with outliers, one all-zero block.
  for (std::int64_t i = 0; i < m; i += 3) x[static_cast<std::size_t>(i * k + (i * 7) % k)] *= 40.0f;
  if (k >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  return x;
}

// The largest |x| of each block of `block` values.
auto block_amax(const std::vector<float>& x, std::int64_t block) -> std::vector<float> {
  std::vector<float> out(x.size() / static_cast<std::size_t>(block), 0.0f);
  for (std::size_t v = 0; v < x.size(); ++v) {
    auto& a = out[v / static_cast<std::size_t>(block)];
    a = std::max(a, std::fabs(x[v]));
  }
  return out;
}

// x quantized as quant_gemm.hpp specifies (d = amax/127, in F16 for blocks
// of 32; q = round(x·127/amax)).
auto quantized_x(const std::vector<float>& x, std::int64_t block) -> std::vector<double> {
  std::vector<double> out(x.size());
  const auto amaxes = block_amax(x, block);
  for (std::size_t b0 = 0; b0 < x.size(); b0 += static_cast<std::size_t>(block)) {
    const float amax = amaxes[b0 / static_cast<std::size_t>(block)];
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const float d = block == 32 ? f16_to_f32(f32_to_f16(amax / 127.0f)) : amax / 127.0f;
    for (std::int64_t v = 0; v < block; ++v) {
      const float q = std::clamp(std::nearbyint(x[b0 + static_cast<std::size_t>(v)] * id), -127.0f, 127.0f);
      out[b0 + static_cast<std::size_t>(v)] = static_cast<double>(d) * q;
    }
  }
  return out;
}

auto quant_gemm_of(tensor_type t, const std::vector<float>& x, std::int64_t m, const std::vector<std::byte>& w,
                   std::int64_t n, std::int64_t k) -> std::vector<float> {
  std::vector<float> y(static_cast<std::size_t>(m * n), NAN);
  quant_gemm(x.data(), m, w.data(), t, n, k, y.data());
  return y;
}

auto bits_equal(const float* a, const float* b, std::size_t n) -> bool { return std::memcmp(a, b, n * 4) == 0; }

// Compares y with two double-precision products of the dequantized weights:
//  - with x quantized as the header specifies, the only error is the
//    kernel's float rounding: per block a product of scales, an int-to-float
//    conversion and an fma, each within 2^-24 of the running sum, so at most
//    (blocks + 8) · 2^-22 of Σ |weight term| · amax (a bound on every term);
//  - with x itself, the activation quantization adds, per value, at most
//    half a step (amax/127 / 2) times |w|: the tolerance is that sum.
void check_against_reference(tensor_type t, const std::vector<float>& x, std::int64_t m,
                             const std::vector<std::byte>& w, std::int64_t n, std::int64_t k,
                             const std::vector<float>& y) {
  const std::int64_t block = act_block(t);
  const auto deq = dequantize(t, w, n, k);
  const auto xq = quantized_x(x, block);
  const auto amaxes = block_amax(x, block);
  const double blocks = static_cast<double>(k / type_traits(t).block_elements);
  double worst_rounding = 0.0, worst_quant = 0.0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double exact = 0.0, with_xq = 0.0, magnitude = 0.0, quant_tol = 0.0;
      for (std::int64_t b0 = 0; b0 < k; b0 += block) {
        const float amax = amaxes[static_cast<std::size_t>((i * k + b0) / block)];
        for (std::int64_t v = b0; v < b0 + block; ++v) {
          const auto xi = static_cast<std::size_t>(i * k + v), wi = static_cast<std::size_t>(j * k + v);
          exact += static_cast<double>(deq.w[wi]) * x[xi];
          with_xq += static_cast<double>(deq.w[wi]) * xq[xi];
          magnitude += (std::abs(deq.w[wi]) + std::abs(deq.mins[wi])) * static_cast<double>(amax);
          quant_tol += std::abs(deq.w[wi]) * static_cast<double>(amax) / 254.0 * 1.0001;
        }
      }
      const double rounding_tol = (blocks + 8.0) * 0x1p-22 * magnitude + 1e-30;
      const double got = y[static_cast<std::size_t>(i * n + j)];
      worst_rounding = std::max(worst_rounding, std::abs(got - with_xq) / rounding_tol);
      worst_quant = std::max(worst_quant, std::abs(got - exact) / (quant_tol + rounding_tol));
    }
  CHECK(worst_rounding <= 1.0);
  CHECK(worst_quant <= 1.0);
}

// The ISA paths this CPU runs.
auto available_isas() -> std::vector<std::string> {
  std::vector<std::string> out;
  for (const char* name : {"avx512-vnni", "avx2", "generic"}) {
    try {
      quant::kernels_named(name);
      out.emplace_back(name);
    } catch (const std::runtime_error& e) {
      MESSAGE("skipping " << name << ": " << e.what());
    }
  }
  return out;
}

// Runs f under every ISA path, then restores the default one.
template <class F>
void for_each_isa(F&& f) {
  const std::string original(quant_isa());
  for (const auto& isa : available_isas()) {
    quant::use_kernels(isa);
    CAPTURE(isa);
    f(isa);
  }
  quant::use_kernels(original);
}

} // namespace

TEST_CASE("quant_gemm equals the double-precision product of the dequantized weights") {
  rng r(20);
  for_each_isa([&](const std::string& isa) {
    for (const auto t : all_types) {
      const std::int64_t kb = act_block(t);
      for (int trial = 0; trial < 12; ++trial) {
        // m: decode, small batches across the micro-kernel's 8 (6, 4) rows,
        // a prefill, whole slabs of 32 (VNNI's batch kernels); n across the
        // 16- and 8-row tiles and the batch kernels' 48; k across the
        // 32-block (4-superblock) chunks.
        const std::int64_t m = trial == 0   ? 1
                               : trial == 1 ? 300
                               : trial == 3 ? 32
                               : trial == 4 ? 64
                               : trial == 5 ? 96
                                            : 1 + static_cast<std::int64_t>(r.next() % 40);
        const std::int64_t n = trial == 1 ? 19 : 1 + static_cast<std::int64_t>(r.next() % 50);
        const std::int64_t k = kb * (trial == 2 ? (kb == 32 ? 70 : 9) : 1 + static_cast<std::int64_t>(r.next() % (kb == 32 ? 40 : 5)));
        if (isa == "generic" && m * n * k > 2'000'000) continue; // the scalar path is slow; its bits are checked below
        CAPTURE(gguf::type_name(t));
        CAPTURE(trial);
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        const auto w = make_weights(t, n, k, trial % 2 == 1, r);
        const auto x = random_x(m, k, r);
        set_cpu_threads(1 + trial % 2);
        check_against_reference(t, x, m, w, n, k, quant_gemm_of(t, x, m, w, n, k));
      }
    }
  });
}

TEST_CASE("every ISA path gives the generic path's bits") {
  rng r(21);
  for (const auto t : all_types) {
    const std::int64_t kb = act_block(t);
    for (int trial = 0; trial < 4; ++trial) {
      // The first: m = 1 (AVX-512's row kernels). The last: two slabs of 32
      // rows, three calls of the batch kernels (48 weight rows, 48, 3:
      // micro-kernel calls of 2 and 1), two threads.
      const std::int64_t m = trial == 0 ? 1 : trial == 3 ? 64 : 1 + static_cast<std::int64_t>(r.next() % 20);
      const std::int64_t n = trial == 3 ? 99 : 1 + static_cast<std::int64_t>(r.next() % 40);
      set_cpu_threads(2);
      const std::int64_t k = kb * (kb == 32 ? 33 + trial : 1 + trial * 2);
      CAPTURE(gguf::type_name(t));
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      const auto w = make_weights(t, n, k, trial != 0, r);
      const auto x = random_x(m, k, r);
      std::vector<std::pair<std::string, std::vector<float>>> results;
      for_each_isa([&](const std::string& isa) { results.emplace_back(isa, quant_gemm_of(t, x, m, w, n, k)); });
      REQUIRE(results.back().first == "generic");
      for (const auto& [isa, y] : results) {
        CAPTURE(isa);
        CHECK(bits_equal(y.data(), results.back().second.data(), y.size()));
      }
    }
  }
}

TEST_CASE("a row of x gives the same bits whatever the batch, its place in it and the threads") {
  rng r(22);
  for_each_isa([&](const std::string& isa) {
    for (const auto t : all_types) {
      const std::int64_t kb = act_block(t);
      // m = 64: VNNI's batch kernels; 95 weight rows: two calls (one a
      // thread), the second's micro-kernel calls of 6, 4 and 1 rows.
      const std::int64_t m = isa == "generic" ? 12 : 64, n = 95, k = kb == 32 ? 32 * 35 : 256 * 5;
      CAPTURE(gguf::type_name(t));
      const auto w = make_weights(t, n, k, true, r);
      const auto x = random_x(m, k, r);
      set_cpu_threads(2);
      const auto full = quant_gemm_of(t, x, m, w, n, k);
      set_cpu_threads(1);
      CHECK(bits_equal(quant_gemm_of(t, x, m, w, n, k).data(), full.data(), full.size()));
      for (std::int64_t i = 0; i < m; i += 5) {
        CAPTURE(i);
        const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
        CHECK(bits_equal(quant_gemm_of(t, row, 1, w, n, k).data(), full.data() + i * n, static_cast<std::size_t>(n)));
      }
      // Batches starting at row 3 and 7: every row in another slot of the
      // micro-kernel (or another lane of a slab).
      for (const auto& [start, rows] : {std::pair<std::int64_t, std::int64_t>{3, m - 5}, {7, std::min<std::int64_t>(32, m - 7)}}) {
        CAPTURE(start);
        CAPTURE(rows);
        const std::vector<float> sub(x.begin() + start * k, x.begin() + (start + rows) * k);
        set_cpu_threads(2);
        CHECK(bits_equal(quant_gemm_of(t, sub, rows, w, n, k).data(), full.data() + start * n,
                         static_cast<std::size_t>(rows * n)));
      }
    }
  });
}

TEST_CASE("quant_gemm_multi equals separate quant_gemm calls, bitwise") {
  rng r(23);
  const std::int64_t k = 512;
  const tensor_type types[] = {tensor_type::q4_k, tensor_type::q8_0, tensor_type::q6_k, tensor_type::q4_0};
  const std::int64_t ns[] = {40, 17, 23, 64};
  // m = 32 and 64: VNNI's batch kernels, one slab and two.
  for (const std::int64_t m : {9, 32, 64}) {
    CAPTURE(m);
    std::vector<std::vector<std::byte>> ws;
    std::vector<std::vector<float>> ys;
    std::vector<quant_job> jobs;
    for (int j = 0; j < 4; ++j) {
      ws.push_back(make_weights(types[j], ns[j], k, true, r));
      ys.emplace_back(static_cast<std::size_t>(m * ns[j]), NAN);
    }
    for (int j = 0; j < 4; ++j) jobs.push_back({ws[j].data(), types[j], ns[j], ys[j].data()});
    const auto x = random_x(m, k, r);
    set_cpu_threads(2);
    quant_gemm_multi(x.data(), m, k, jobs);
    for (int j = 0; j < 4; ++j) {
      CAPTURE(j);
      const auto alone = quant_gemm_of(types[j], x, m, ws[j], ns[j], k);
      CHECK(bits_equal(ys[j].data(), alone.data(), alone.size()));
    }
  }
}

TEST_CASE("the types quant_gemm takes, and the ISA names") {
  for (const auto t : all_types) CHECK(quant_gemm_supports(t));
  CHECK_FALSE(quant_gemm_supports(tensor_type::f32));
  CHECK_FALSE(quant_gemm_supports(tensor_type::q4_1));
  CHECK_FALSE(quant_gemm_supports(tensor_type::q8_k));
  const auto isa = std::string(quant_isa());
  CHECK((isa == "avx512-vnni" || isa == "avx2" || isa == "generic"));
  CHECK_THROWS_WITH_AS(quant::kernels_named("sse9"),
                       "TROUPE_CPU_ISA=sse9: unknown instruction set (avx512-vnni, avx2 or generic)",
                       std::runtime_error);
}
