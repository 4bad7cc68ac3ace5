// Dequantization on hand-built blocks: the bytes are written out below and
// every expected value worked out from the format (gguf_quant.hpp's table),
// so each float is exact.
#include "engine/formats/gguf_quant.hpp"
#include "engine/formats/mxfp4.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace troupe;
using gguf::tensor_type;

namespace {

constexpr std::uint16_t f16_quarter = 0x3400, f16_half = 0x3800, f16_one = 0x3C00, f16_two = 0x4000;

struct block {
  std::vector<std::byte> bytes;
  void u16(std::uint16_t v) {
    bytes.push_back(static_cast<std::byte>(v & 0xFF));
    bytes.push_back(static_cast<std::byte>(v >> 8));
  }
  void u8(std::uint8_t v) { bytes.push_back(static_cast<std::byte>(v)); }
  void fill(std::size_t n, std::uint8_t v) { bytes.insert(bytes.end(), n, static_cast<std::byte>(v)); }
};

auto dequantize(tensor_type t, const block& b, std::int64_t n) -> std::vector<float> {
  std::vector<float> y(static_cast<std::size_t>(n), -999.0f);
  gguf::dequantize_row(t, b.bytes.data(), y.data(), n);
  return y;
}

// Q4_K/Q5_K scales: sub-blocks 0-3 read the low 6 bits of bytes j (scale)
// and j+4 (min): 1/5, 2/6, 3/7, 4/8. Sub-blocks 4-7 read byte j+4's nibbles
// (scale low, min high) under bytes j-4's and j's top two bits:
//   4: 0x9A -> scale 0xA | 1<<4 (0x41's top bits) = 26, min 9 | 2<<4 (0x85's) = 41
//   5: 0x0B -> 11, 0;  6: 0x0C -> 12, 0;  7: 0x0D -> 13, 0.
constexpr std::array<std::uint8_t, 12> k_scales = {0x41, 0x02, 0x03, 0x04, 0x85, 0x06,
                                                   0x07, 0x08, 0x9A, 0x0B, 0x0C, 0x0D};

} // namespace

TEST_CASE("Q8_0: d times each int8") {
  block b;
  b.u16(f16_half);
  for (int i = 0; i < 32; ++i) b.u8(static_cast<std::uint8_t>(static_cast<std::int8_t>(i * 8 - 128)));
  b.u16(f16_two); // a second block: d = 2, q = 1
  b.fill(32, 1);
  const auto y = dequantize(tensor_type::q8_0, b, 64);
  for (int i = 0; i < 32; ++i) CHECK(y[i] == 0.5f * static_cast<float>(i * 8 - 128));
  for (int i = 32; i < 64; ++i) CHECK(y[i] == 2.0f);
}

TEST_CASE("Q4_0: low nibbles first, then high, minus 8, times d") {
  block b;
  b.u16(f16_two);
  for (int i = 0; i < 16; ++i) b.u8(static_cast<std::uint8_t>(i | ((15 - i) << 4)));
  const auto y = dequantize(tensor_type::q4_0, b, 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(y[i] == 2.0f * static_cast<float>(i - 8));
    CHECK(y[i + 16] == 2.0f * static_cast<float>(7 - i));
  }
}

TEST_CASE("Q5_0: Q4_0's nibbles with bit i of qh as value i's fifth bit, minus 16, times d; as Q8_0 exactly") {
  block b;
  b.u16(f16_half);
  // qh: bits 0-15 set on even i (values 0-15), bits 16-31 set for i >= 24.
  std::uint32_t qh = 0;
  for (int i = 0; i < 16; i += 2) qh |= 1u << i;
  for (int i = 24; i < 32; ++i) qh |= 1u << i;
  for (int k = 0; k < 4; ++k) b.u8(static_cast<std::uint8_t>(qh >> (8 * k)));
  for (int i = 0; i < 16; ++i) b.u8(static_cast<std::uint8_t>(i | ((15 - i) << 4)));
  const auto y = dequantize(tensor_type::q5_0, b, 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(y[i] == 0.5f * static_cast<float>((i | (i % 2 == 0 ? 16 : 0)) - 16));
    CHECK(y[i + 16] == 0.5f * static_cast<float>(((15 - i) | (i + 16 >= 24 ? 16 : 0)) - 16));
  }
  std::vector<std::byte> q8(34);
  gguf::q5_0_to_q8_0(b.bytes.data(), q8.data(), 32);
  float z[32];
  gguf::dequantize_row(tensor_type::q8_0, q8.data(), z, 32);
  CHECK(std::vector<float>(z, z + 32) == y);
  CHECK_THROWS_AS(gguf::q5_0_to_q8_0(b.bytes.data(), q8.data(), 16), std::invalid_argument);
}

TEST_CASE("the K-quants' packed 6-bit scales and mins") {
  const std::array<std::pair<int, int>, 8> want = {{{1, 5}, {2, 6}, {3, 7}, {4, 8}, {26, 41}, {11, 0}, {12, 0}, {13, 0}}};
  for (int j = 0; j < 8; ++j) {
    std::uint8_t sc = 0, m = 0;
    gguf::k_scale_min(j, k_scales.data(), sc, m);
    CHECK(sc == want[static_cast<std::size_t>(j)].first);
    CHECK(m == want[static_cast<std::size_t>(j)].second);
  }
}

TEST_CASE("Q4_K: d*scale*q - dmin*min per sub-block of 32") {
  block b;
  b.u16(f16_one);  // d
  b.u16(f16_half); // dmin
  for (auto s : k_scales) b.u8(s);
  b.fill(128, 0x31); // low nibble 1 (a chunk's first sub-block), high 3 (its second)
  const auto y = dequantize(tensor_type::q4_k, b, 256);
  // sub-block j: 1*scale_j*q - 0.5*min_j
  const std::array<float, 8> want = {1 * 1 - 2.5f, 2 * 3 - 3.0f, 3 * 1 - 3.5f, 4 * 3 - 4.0f,
                                     26 * 1 - 20.5f, 11 * 3, 12 * 1, 13 * 3};
  for (int i = 0; i < 256; ++i) {
    CAPTURE(i);
    CHECK(y[static_cast<std::size_t>(i)] == want[static_cast<std::size_t>(i / 32)]);
  }
}

TEST_CASE("Q5_K: Q4_K's nibbles with a fifth bit, bit 2c and 2c+1 of qh for chunk c") {
  block b;
  b.u16(f16_one);
  b.u16(f16_half);
  for (auto s : k_scales) b.u8(s);
  b.fill(32, 0x06); // qh: bit 1 (chunk 0's second sub-block) and bit 2 (chunk 1's first)
  b.fill(128, 0x31);
  const auto y = dequantize(tensor_type::q5_k, b, 256);
  const std::array<float, 8> want = {1 * 1 - 2.5f, 2 * (3 + 16) - 3.0f, 3 * (1 + 16) - 3.5f, 4 * 3 - 4.0f,
                                     26 * 1 - 20.5f, 11 * 3, 12 * 1, 13 * 3};
  for (int i = 0; i < 256; ++i) {
    CAPTURE(i);
    CHECK(y[static_cast<std::size_t>(i)] == want[static_cast<std::size_t>(i / 32)]);
  }
}

TEST_CASE("Q6_K: 6-bit values from ql nibbles and qh bit pairs, centred on 32, times d*scale") {
  block b;
  b.fill(128, 0x52); // ql: low nibble 2, high 5
  b.fill(64, 0xE4);  // qh: bit pairs 0, 1, 2, 3 (from the lowest)
  std::array<std::int8_t, 16> sc{};
  for (int i = 0; i < 16; ++i) sc[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(i % 3 == 1 ? -(i + 1) : i + 1);
  for (auto s : sc) b.u8(static_cast<std::uint8_t>(s));
  b.u16(f16_quarter);
  const auto y = dequantize(tensor_type::q6_k, b, 256);
  // Within each half of 128: four groups of 32 take (ql's low nibble, pair 0),
  // (the second 32 bytes' low nibble, pair 1), (high nibble, pair 2),
  // (second high, pair 3): 2|0<<4, 2|1<<4, 5|2<<4, 5|3<<4, minus 32.
  const std::array<int, 4> q = {2 - 32, 18 - 32, 37 - 32, 53 - 32};
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, g = (i % 128) / 32, l = i % 32;
    const int scale = sc[static_cast<std::size_t>(8 * h + l / 16 + 2 * g)];
    CAPTURE(i);
    CHECK(y[static_cast<std::size_t>(i)] == 0.25f * static_cast<float>(scale) * static_cast<float>(q[static_cast<std::size_t>(g)]));
  }
}

TEST_CASE("F32, F16 and BF16 rows; other types refused") {
  block b;
  b.u16(f16_two);
  b.u16(0xC000); // -2
  const auto y = dequantize(tensor_type::f16, b, 2);
  CHECK(y == std::vector<float>{2.0f, -2.0f});
  block bf;
  bf.u16(0x3F80); // 1.0 in BF16
  CHECK(dequantize(tensor_type::bf16, bf, 1) == std::vector<float>{1.0f});
  float v = 3.25f;
  block f;
  f.bytes.resize(4);
  std::memcpy(f.bytes.data(), &v, 4);
  CHECK(dequantize(tensor_type::f32, f, 1) == std::vector<float>{3.25f});
  CHECK_FALSE(gguf::can_dequantize(tensor_type::q2_k));
  float out[256];
  CHECK_THROWS_AS(gguf::dequantize_row(tensor_type::q2_k, b.bytes.data(), out, 256), std::invalid_argument);
  CHECK_THROWS_AS(gguf::dequantize_row(tensor_type::q8_0, b.bytes.data(), out, 31), std::invalid_argument);
}

TEST_CASE("quantize then dequantize: each type's error, and the extremes kept") {
  // Seeded normal rows with an outlier a row: a layout written one way and
  // read another would give errors the size of the values themselves.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t n = 1024;
  struct bound {
    tensor_type type;
    double rms; // the most RMS error relative to the row's RMS
  };
  for (const auto& [type, max_rms] : {bound{tensor_type::q8_0, 0.01}, bound{tensor_type::q4_0, 0.15},
                                      bound{tensor_type::q4_k, 0.12}, bound{tensor_type::q5_k, 0.06},
                                      bound{tensor_type::q6_k, 0.04}}) {
    CAPTURE(gguf::type_name(type));
    REQUIRE(gguf::can_quantize(type));
    const auto tr = *gguf::traits(static_cast<std::uint32_t>(type));
    for (int row = 0; row < 8; ++row) {
      std::vector<float> x(static_cast<std::size_t>(n));
      for (auto& v : x) v = normal(rng) * static_cast<float>(row + 1);
      x[static_cast<std::size_t>(row * 97)] = 9.0f * static_cast<float>(row + 1) * (row % 2 ? -1.0f : 1.0f);
      if (row == 7) std::fill(x.begin(), x.begin() + 256, 0.0f); // an all-zero block
      std::vector<std::byte> q(static_cast<std::size_t>(n / tr.block_elements * tr.block_bytes));
      gguf::quantize_row(type, x.data(), q.data(), n);
      std::vector<float> y(static_cast<std::size_t>(n));
      gguf::dequantize_row(type, q.data(), y.data(), n);
      double err = 0.0, norm = 0.0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        err += (x[i] - y[i]) * (x[i] - y[i]);
        norm += x[i] * x[i];
      }
      CAPTURE(row);
      CHECK(std::sqrt(err / norm) < max_rms);
      // The outlier sets its block's scale and is kept to within a few percent.
      const auto o = static_cast<std::size_t>(row * 97);
      CHECK(std::fabs(y[o] - x[o]) <= 0.05 * std::fabs(x[o]));
      if (row == 7)
        for (std::size_t i = 0; i < 256; ++i) CHECK(y[i] == 0.0f);
    }
  }
  float x[32] = {};
  std::byte out[64];
  CHECK_THROWS_AS(gguf::quantize_row(tensor_type::q5_0, x, out, 256), std::invalid_argument);
  CHECK_THROWS_AS(gguf::quantize_row(tensor_type::q8_0, x, out, 16), std::invalid_argument);
}

TEST_CASE("MXFP4: ggml's value table and nibble order, exactly Q8_0, and Hugging Face's blocks") {
  // One block by hand: e = 126 (scale 2^-2), codes 0..15 then 15..0.
  std::byte block[17];
  block[0] = std::byte{126};
  for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<std::byte>(j | ((15 - j) << 4));
  float y[32];
  gguf::dequantize_row(tensor_type::mxfp4, block, y, 32);
  const float kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int j = 0; j < 16; ++j) {
    CHECK(y[j] == kv[j] * 0.25f);
    CHECK(y[16 + j] == kv[15 - j] * 0.25f);
  }
  // Exactly Q8_0, and quantizing the values back gives the same block.
  std::byte q8[34];
  REQUIRE(mxfp4::to_q8_0(block, q8, 32));
  float z[32];
  gguf::dequantize_row(tensor_type::q8_0, q8, z, 32);
  for (int j = 0; j < 32; ++j) CHECK(z[j] == y[j]);
  std::byte again[17]; // the same values (code 8, -0, comes back as code 0)
  gguf::quantize_row(tensor_type::mxfp4, y, again, 32);
  CHECK(again[0] == block[0]);
  gguf::dequantize_row(tensor_type::mxfp4, again, z, 32);
  for (int j = 0; j < 32; ++j) CHECK(z[j] == y[j]);
  // A scale F16 cannot hold is refused; an all-zero block is d = 0.
  // exact_in_q8_0 says so beforehand, reading only.
  CHECK(mxfp4::exact_in_q8_0(block, 32));
  block[0] = std::byte{20};
  CHECK_FALSE(mxfp4::to_q8_0(block, q8, 32));
  CHECK_FALSE(mxfp4::exact_in_q8_0(block, 32));
  block[0] = std::byte{143};
  CHECK(mxfp4::exact_in_q8_0(block, 32));
  block[0] = std::byte{144};
  CHECK_FALSE(mxfp4::exact_in_q8_0(block, 32));
  std::byte zero[17] = {};
  zero[0] = std::byte{255}; // zeros (codes 0 and 8) under any scale
  zero[5] = std::byte{0x88};
  CHECK(mxfp4::exact_in_q8_0(zero, 32));
  REQUIRE(mxfp4::to_q8_0(zero, q8, 32));
  CHECK(gguf::half_at(q8) == 0.0f);
  // Hugging Face's order: low nibble value 2j, high 2j + 1.
  std::uint8_t hf_blocks[16], hf_scale = 127;
  for (int j = 0; j < 16; ++j) hf_blocks[j] = static_cast<std::uint8_t>((j % 8) | ((7 - j % 8) << 4));
  std::byte from_hf[17];
  mxfp4::from_hf(hf_blocks, &hf_scale, from_hf, 32);
  gguf::dequantize_row(tensor_type::mxfp4, from_hf, y, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK(y[2 * j] == kv[j % 8] * 0.5f);
    CHECK(y[2 * j + 1] == kv[7 - j % 8] * 0.5f);
  }
  // Random rows: E2M1's error, each value within half a step of the grid.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256), back(256);
  for (auto& v : x) v = normal(rng);
  std::vector<std::byte> q(8 * 17);
  gguf::quantize_row(tensor_type::mxfp4, x.data(), q.data(), 256);
  gguf::dequantize_row(tensor_type::mxfp4, q.data(), back.data(), 256);
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) err += (x[i] - back[i]) * (x[i] - back[i]), norm += x[i] * x[i];
  CHECK(std::sqrt(err / norm) < 0.2);
}
