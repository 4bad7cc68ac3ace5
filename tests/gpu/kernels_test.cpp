// Every kernel against a double-precision reference computed here, on fresh
// random inputs at many shapes, in both element types; outputs poisoned
// (NaN) before each run. Skips (77) where no CUDA device can be used.

#define DOCTEST_CONFIG_IMPLEMENT
#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "engine/cpu/ops.hpp"
#include "base/rng.hpp"
#include "tests/gpu/gpu_test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace troupe;
using namespace troupe::gpu_test;

namespace {

auto uniform(rng& r) -> float { return static_cast<float>(static_cast<double>(r.next() >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

auto random_vector(rng& r, std::int64_t n, float scale = 1.0f) -> std::vector<float> {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = scale * uniform(r);
  return v;
}

constexpr dtype types[] = {dtype::f32, dtype::bf16};

} // namespace

TEST_CASE("embedding gathers rows exactly") {
  rng r(1);
  for (const auto type : types)
    for (const std::int64_t dim : {8, 100, 2048}) {
      CAPTURE(dim);
      const std::int64_t vocab = 1000, rows = 37;
      const auto table = rounded(type, random_vector(r, vocab * dim));
      std::vector<std::int32_t> ids(rows);
      for (auto& id : ids) id = static_cast<std::int32_t>(r.next() % vocab);
      device_buffer t(type, vocab * dim), i(dtype::f32, rows), out(type, rows * dim);
      t.upload(table);
      i.upload_ints(ids);
      kernels::embedding(type, {t.get(), i.as<std::int32_t>(), rows, dim, out.get()}, nullptr);
      check_launch("embedding");
      const auto got = out.download();
      for (std::int64_t k = 0; k < rows * dim; ++k)
        REQUIRE(got[static_cast<std::size_t>(k)] == table[static_cast<std::size_t>(ids[static_cast<std::size_t>(k / dim)] * dim + k % dim)]);
    }
}

TEST_CASE("rms_norm, with and without the fused residual add") {
  rng r(2);
  for (const auto type : types)
    for (const std::int64_t dim : {64, 1000, 4096})
      for (const bool fused : {false, true}) {
        CAPTURE(dim);
        CAPTURE(fused);
        const std::int64_t rows = 1 + static_cast<std::int64_t>(r.next() % 40);
        const auto x = rounded(type, random_vector(r, rows * dim, 3.0f));
        const auto add = rounded(type, random_vector(r, rows * dim));
        const auto w = random_vector(r, dim);
        device_buffer res(type, rows * dim), a(type, rows * dim), wt(dtype::f32, dim), out(type, rows * dim);
        res.upload(x);
        a.upload(add);
        wt.upload(w);
        kernels::rms_norm(type, {res.get(), fused ? a.get() : nullptr, wt.as<float>(), out.get(), rows, dim, 1e-5f},
                          nullptr);
        check_launch("rms_norm");
        std::vector<double> want(static_cast<std::size_t>(rows * dim)), want_res(want.size());
        for (std::int64_t t = 0; t < rows; ++t) {
          double ss = 0;
          for (std::int64_t i = 0; i < dim; ++i) {
            const auto k = static_cast<std::size_t>(t * dim + i);
            want_res[k] = x[k] + (fused ? add[k] : 0.0);
            ss += want_res[k] * want_res[k];
          }
          const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + 1e-5);
          for (std::int64_t i = 0; i < dim; ++i) {
            const auto k = static_cast<std::size_t>(t * dim + i);
            want[k] = want_res[k] * inv * w[static_cast<std::size_t>(i)];
          }
        }
        CHECK(relative_error(out.download(), want) <= tolerance(type));
        CHECK(relative_error(res.download(), want_res) <= tolerance(type));
      }
}

TEST_CASE("RoPE rotates q and k heads as the CPU backend does, llama3 scaling included") {
  rng r(3);
  for (const auto type : types)
    for (const std::int64_t hd : {64, 128}) {
      CAPTURE(hd);
      model_config c;
      c.head_dim = hd;
      c.rope_theta = 500000.0;
      c.rope_scaling = rope_scaling_config::llama3(32.0, 1.0, 4.0, 8192);
      const std::int64_t nq = 8, nkv = 2, rows = 19, max_pos = 4096, stride = (nq + 2 * nkv) * hd;
      const auto freq = rope_inv_freq(c);
      std::vector<std::int32_t> all(max_pos);
      std::iota(all.begin(), all.end(), 0);
      std::vector<float> cos, sin;
      rope_tables(freq, all.data(), max_pos, cos, sin);
      std::vector<std::int32_t> pos(rows);
      for (auto& p : pos) p = static_cast<std::int32_t>(r.next() % max_pos);
      const auto qkv = rounded(type, random_vector(r, rows * stride));
      device_buffer x(type, rows * stride), ps(dtype::f32, rows), cs(dtype::f32, max_pos * hd / 2),
          sn(dtype::f32, max_pos * hd / 2);
      x.upload(qkv);
      ps.upload_ints(pos);
      cs.upload(cos);
      sn.upload(sin);
      kernels::rope(type, {x.get(), stride, ps.as<std::int32_t>(), cs.as<float>(), sn.as<float>(), rows, nq, nkv, hd},
                    nullptr);
      check_launch("rope");
      std::vector<double> want(qkv.begin(), qkv.end());
      for (std::int64_t t = 0; t < rows; ++t) {
        std::vector<float> row(qkv.begin() + t * stride, qkv.begin() + t * stride + (nq + nkv) * hd), c1, s1;
        rope_tables(freq, &pos[static_cast<std::size_t>(t)], 1, c1, s1);
        apply_rope(row.data(), 1, nq + nkv, hd, c1.data(), s1.data());
        std::copy(row.begin(), row.end(), want.begin() + t * stride); // v untouched
      }
      CHECK(relative_error(x.download(), want) <= tolerance(type));
    }
}

TEST_CASE("swiglu") {
  rng r(4);
  for (const auto type : types)
    for (const std::int64_t inter : {32, 1000, 8192}) {
      const std::int64_t rows = 1 + static_cast<std::int64_t>(r.next() % 20);
      const auto gu = rounded(type, random_vector(r, rows * 2 * inter, 4.0f));
      device_buffer in(type, rows * 2 * inter), out(type, rows * inter);
      in.upload(gu);
      kernels::swiglu(type, {in.get(), out.get(), rows, inter}, nullptr);
      check_launch("swiglu");
      std::vector<double> want(static_cast<std::size_t>(rows * inter));
      for (std::int64_t t = 0; t < rows; ++t)
        for (std::int64_t i = 0; i < inter; ++i) {
          const double g = gu[static_cast<std::size_t>(t * 2 * inter + i)], u = gu[static_cast<std::size_t>(t * 2 * inter + inter + i)];
          want[static_cast<std::size_t>(t * inter + i)] = g / (1 + std::exp(-g)) * u;
        }
      CHECK(relative_error(out.download(), want) <= tolerance(type));
    }
}

TEST_CASE("convert rounds as the host does") {
  rng r(5);
  const auto v = random_vector(r, 10000, 100.0f);
  for (const auto from : {dtype::f32, dtype::f16, dtype::bf16})
    for (const auto to : types) {
      device_buffer src(from, 10000), dst(to, 10000);
      src.upload(v);
      kernels::convert(from, src.get(), to, dst.get(), 10000, nullptr);
      check_launch("convert");
      auto want = src.download();
      want = rounded(to, want);
      CHECK(dst.download() == want);
    }
}

namespace {

// A paged cache filled with random keys and values, and each sequence's
// block table drawn from a shuffled pool.
struct paged_setup {
  std::int64_t nkv, hd, bs, num_blocks, max_blocks;
  std::vector<float> k, v; // [num_blocks, nkv, bs, hd]
  std::vector<std::int32_t> tables;

  paged_setup(rng& r, dtype type, std::int64_t nkv_, std::int64_t hd_, std::int64_t bs_,
              const std::vector<std::int32_t>& lens)
    : nkv(nkv_), hd(hd_), bs(bs_) {
    max_blocks = 1;
    std::int64_t total = 0;
    for (const auto l : lens) {
      max_blocks = std::max<std::int64_t>(max_blocks, (l + bs - 1) / bs);
      total += (l + bs - 1) / bs;
    }
    num_blocks = total + 3;
    k = rounded(type, random_vector(r, num_blocks * nkv * bs * hd));
    v = rounded(type, random_vector(r, num_blocks * nkv * bs * hd));
    std::vector<std::int32_t> pool(static_cast<std::size_t>(num_blocks));
    std::iota(pool.begin(), pool.end(), 0);
    for (std::size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[r.next() % i]);
    tables.assign(lens.size() * static_cast<std::size_t>(max_blocks), -1);
    std::size_t next = 0;
    for (std::size_t s = 0; s < lens.size(); ++s)
      for (std::int64_t b = 0; b < (lens[s] + bs - 1) / bs; ++b) tables[s * static_cast<std::size_t>(max_blocks) + static_cast<std::size_t>(b)] = pool[next++];
  }
  auto at(std::size_t seq, std::int64_t t, std::int64_t h) const -> std::size_t {
    const auto b = tables[seq * static_cast<std::size_t>(max_blocks) + static_cast<std::size_t>(t / bs)];
    return static_cast<std::size_t>(((b * nkv + h) * bs + t % bs) * hd);
  }
  // softmax(q · K[0..=last]ᵀ · scale) · V for query head h's kv head.
  void reference(std::size_t seq, const float* q, std::int64_t last, std::int64_t kv_head, double scale,
                 double* out) const {
    std::vector<double> s(static_cast<std::size_t>(last + 1));
    double mx = -INFINITY;
    for (std::int64_t t = 0; t <= last; ++t) {
      double dot = 0;
      for (std::int64_t d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * k[at(seq, t, kv_head) + static_cast<std::size_t>(d)];
      s[static_cast<std::size_t>(t)] = dot * scale;
      mx = std::max(mx, dot * scale);
    }
    double total = 0;
    for (auto& x : s) total += (x = std::exp(x - mx));
    for (std::int64_t d = 0; d < hd; ++d) {
      double a = 0;
      for (std::int64_t t = 0; t <= last; ++t) a += s[static_cast<std::size_t>(t)] * v[at(seq, t, kv_head) + static_cast<std::size_t>(d)];
      out[d] = a / total;
    }
  }
};

} // namespace

TEST_CASE("decode attention over paged KV: GQA, split-K, ragged contexts") {
  rng r(6);
  for (const auto type : types)
    for (const auto& [nq, nkv] : {std::pair{8, 8}, std::pair{32, 8}, std::pair{16, 2}})
      for (const std::int64_t hd : {64, 128})
        for (const int splits : {1, 2, 5}) {
          CAPTURE(nq);
          CAPTURE(nkv);
          CAPTURE(hd);
          CAPTURE(splits);
          const std::int64_t bs = 16;
          std::vector<std::int32_t> lens(1 + r.next() % 9);
          for (auto& l : lens) l = static_cast<std::int32_t>(1 + r.next() % 700);
          lens[0] = 1; // a first token attends only to itself
          const paged_setup kv(r, type, nkv, hd, bs, lens);
          const auto seqs = static_cast<std::int64_t>(lens.size());
          // Query rows interleaved with unrelated rows, as in a mixed batch.
          const std::int64_t stride = (nq + 2 * nkv) * hd, rows = 2 * seqs;
          const auto q = rounded(type, random_vector(r, rows * stride));
          std::vector<std::int32_t> q_rows(lens.size());
          for (std::size_t s = 0; s < lens.size(); ++s) q_rows[s] = static_cast<std::int32_t>(2 * s + 1);
          device_buffer dq(type, rows * stride), dk(type, static_cast<std::int64_t>(kv.k.size())),
              dv(type, static_cast<std::int64_t>(kv.v.size())), dt(dtype::f32, static_cast<std::int64_t>(kv.tables.size())),
              dl(dtype::f32, seqs), dr(dtype::f32, seqs), out(type, rows * nq * hd);
          dq.upload(q);
          dk.upload(kv.k);
          dv.upload(kv.v);
          dt.upload_ints(kv.tables);
          dl.upload_ints(lens);
          dr.upload_ints(q_rows);
          kernels::decode_attention_params p;
          p.q = dq.get();
          p.q_stride = stride;
          p.q_rows = dr.as<std::int32_t>();
          p.k_cache = dk.get();
          p.v_cache = dv.get();
          p.block_tables = dt.as<std::int32_t>();
          p.max_blocks = kv.max_blocks;
          p.context_lens = dl.as<std::int32_t>();
          p.out = out.get();
          p.num_seqs = seqs;
          p.num_q_heads = nq;
          p.num_kv_heads = nkv;
          p.head_dim = hd;
          p.block_size = bs;
          p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
          p.num_splits = splits;
          device_buffer ws(dtype::f32, std::max<std::int64_t>(1, kernels::decode_workspace_floats(p)));
          p.workspace = ws.as<float>();
          kernels::decode_attention(type, p, nullptr);
          check_launch("decode_attention");
          const auto got_all = out.download();
          std::vector<float> got;
          std::vector<double> want;
          for (std::size_t s = 0; s < lens.size(); ++s)
            for (std::int64_t h = 0; h < nq; ++h) {
              std::vector<double> o(static_cast<std::size_t>(hd));
              kv.reference(s, &q[static_cast<std::size_t>(q_rows[s] * stride + h * hd)], lens[s] - 1, h / (nq / nkv),
                           1.0 / std::sqrt(static_cast<double>(hd)), o.data());
              want.insert(want.end(), o.begin(), o.end());
              const auto at = static_cast<std::size_t>((q_rows[s] * nq + h) * hd);
              got.insert(got.end(), got_all.begin() + static_cast<std::ptrdiff_t>(at),
                         got_all.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(hd)));
            }
          CHECK(relative_error(got, want) <= tolerance(type));
          // The rows between were not written.
          for (std::size_t s = 0; s < lens.size(); ++s) CHECK(std::isnan(got_all[2 * s * static_cast<std::size_t>(nq * hd)]));
        }
}

TEST_CASE("prefill attention: chunks after cached context, causal, in tiles") {
  rng r(7);
  for (const auto type : types)
    for (const auto& [nq, nkv] : {std::pair{4, 4}, std::pair{8, 2}})
      for (const std::int64_t hd : {64, 128}) {
        CAPTURE(nq);
        CAPTURE(nkv);
        CAPTURE(hd);
        const std::int64_t bs = 16;
        // Each sequence: `cached` positions already in the cache, then a chunk.
        const std::size_t seqs = 1 + r.next() % 4;
        std::vector<std::int32_t> cached(seqs), chunk(seqs), lens(seqs);
        for (std::size_t s = 0; s < seqs; ++s) {
          cached[s] = static_cast<std::int32_t>(r.next() % 3 == 0 ? 0 : r.next() % 200);
          chunk[s] = static_cast<std::int32_t>(1 + r.next() % 70);
          lens[s] = cached[s] + chunk[s];
        }
        const paged_setup kv(r, type, nkv, hd, bs, lens);
        std::vector<std::int32_t> positions, row_seq, tile_first, tile_rows;
        for (std::size_t s = 0; s < seqs; ++s)
          for (std::int32_t i = 0; i < chunk[s]; ++i) {
            if (i % kernels::prefill_tile_rows == 0) {
              tile_first.push_back(static_cast<std::int32_t>(positions.size()));
              tile_rows.push_back(std::min(kernels::prefill_tile_rows, chunk[s] - i));
            }
            positions.push_back(cached[s] + i);
            row_seq.push_back(static_cast<std::int32_t>(s));
          }
        const auto rows = static_cast<std::int64_t>(positions.size());
        const std::int64_t stride = nq * hd;
        const auto q = rounded(type, random_vector(r, rows * stride));
        device_buffer dq(type, rows * stride), dk(type, static_cast<std::int64_t>(kv.k.size())),
            dv(type, static_cast<std::int64_t>(kv.v.size())), dt(dtype::f32, static_cast<std::int64_t>(kv.tables.size())),
            dp(dtype::f32, rows), ds(dtype::f32, rows), dtf(dtype::f32, static_cast<std::int64_t>(tile_first.size())),
            dtr(dtype::f32, static_cast<std::int64_t>(tile_rows.size())), out(type, rows * stride);
        dq.upload(q);
        dk.upload(kv.k);
        dv.upload(kv.v);
        dt.upload_ints(kv.tables);
        dp.upload_ints(positions);
        ds.upload_ints(row_seq);
        dtf.upload_ints(tile_first);
        dtr.upload_ints(tile_rows);
        kernels::prefill_attention_params p;
        p.q = dq.get();
        p.q_stride = stride;
        p.positions = dp.as<std::int32_t>();
        p.row_seq = ds.as<std::int32_t>();
        p.tile_first_row = dtf.as<std::int32_t>();
        p.tile_num_rows = dtr.as<std::int32_t>();
        p.num_tiles = static_cast<std::int64_t>(tile_first.size());
        p.k_cache = dk.get();
        p.v_cache = dv.get();
        p.block_tables = dt.as<std::int32_t>();
        p.max_blocks = kv.max_blocks;
        p.out = out.get();
        p.num_q_heads = nq;
        p.num_kv_heads = nkv;
        p.head_dim = hd;
        p.block_size = bs;
        p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
        kernels::prefill_attention(type, p, nullptr);
        check_launch("prefill_attention");
        std::vector<double> want(static_cast<std::size_t>(rows * stride));
        for (std::int64_t t = 0; t < rows; ++t)
          for (std::int64_t h = 0; h < nq; ++h)
            kv.reference(static_cast<std::size_t>(row_seq[static_cast<std::size_t>(t)]), &q[static_cast<std::size_t>(t * stride + h * hd)],
                         positions[static_cast<std::size_t>(t)], h / (nq / nkv), 1.0 / std::sqrt(static_cast<double>(hd)),
                         &want[static_cast<std::size_t>(t * stride + h * hd)]);
        CHECK(relative_error(out.download(), want) <= tolerance(type));
      }
}

TEST_CASE("kv_append writes each row's keys and values into its slot, and skips padding") {
  rng r(8);
  for (const auto type : types) {
    const std::int64_t nq = 8, nkv = 2, hd = 64, bs = 16, blocks = 10, rows = 30;
    const std::int64_t stride = (nq + 2 * nkv) * hd;
    const auto qkv = rounded(type, random_vector(r, rows * stride));
    std::vector<std::int32_t> slots(rows);
    std::vector<std::int32_t> all(static_cast<std::size_t>(blocks * bs));
    std::iota(all.begin(), all.end(), 0);
    for (std::size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[r.next() % i]);
    for (std::int64_t t = 0; t < rows; ++t) slots[static_cast<std::size_t>(t)] = t % 7 == 3 ? -1 : all[static_cast<std::size_t>(t)];
    device_buffer dq(type, rows * stride), ds(dtype::f32, rows), kc(type, blocks * nkv * bs * hd), vc(type, blocks * nkv * bs * hd);
    dq.upload(qkv);
    ds.upload_ints(slots);
    kernels::kv_append(type, {dq.get(), stride, nq * hd, (nq + nkv) * hd, ds.as<std::int32_t>(), kc.get(), vc.get(), rows, nkv, hd, bs},
                       nullptr);
    check_launch("kv_append");
    const auto k = kc.download(), v = vc.download();
    std::size_t written = 0;
    for (std::int64_t t = 0; t < rows; ++t) {
      const auto slot = slots[static_cast<std::size_t>(t)];
      if (slot < 0) continue;
      for (std::int64_t h = 0; h < nkv; ++h)
        for (std::int64_t d = 0; d < hd; ++d) {
          const auto at = static_cast<std::size_t>((((slot / bs) * nkv + h) * bs + slot % bs) * hd + d);
          REQUIRE(k[at] == qkv[static_cast<std::size_t>(t * stride + nq * hd + h * hd + d)]);
          REQUIRE(v[at] == qkv[static_cast<std::size_t>(t * stride + (nq + nkv) * hd + h * hd + d)]);
          ++written;
        }
    }
    CHECK(static_cast<std::size_t>(std::count_if(k.begin(), k.end(), [](float x) { return !std::isnan(x); })) == written);
  }
}

auto main(int argc, char** argv) -> int {
  if (const int skip = gpu_test::device_or_skip(); skip != 0) return skip;
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
