// The CUDA executor's host side, on the CPU: block tables from the steps'
// diffs (request_tables, which the CPU executor keeps too), the flat arrays
// the kernels read, and graph batch padding.

#include "engine/cuda/step_plan.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace troupe;
using namespace troupe::cuda;

TEST_CASE("graph batch sizes: 1, 2, 4, then multiples of 8, never past the largest") {
  CHECK(graph_batch_size(1, 256) == 1);
  CHECK(graph_batch_size(2, 256) == 2);
  CHECK(graph_batch_size(3, 256) == 4);
  CHECK(graph_batch_size(5, 256) == 8);
  CHECK(graph_batch_size(9, 256) == 16);
  CHECK(graph_batch_size(256, 256) == 256);
  CHECK(graph_batch_size(257, 256) == 0);
  CHECK(graph_batch_size(0, 256) == 0);
  CHECK(graph_batch_size(3, 3) == 3);
  CHECK(graph_batch_size(11, 12) == 12);
  const auto sizes = graph_batch_sizes(32);
  CHECK(sizes == std::vector<std::int32_t>{1, 2, 4, 8, 16, 24, 32});
  for (std::int32_t n = 1; n <= 100; ++n) {
    const auto s = graph_batch_size(n, 100);
    CHECK(s >= n);
    CHECK(std::find(graph_batch_sizes(100).begin(), graph_batch_sizes(100).end(), s) != graph_batch_sizes(100).end());
  }
}

TEST_CASE("block tables follow the diffs: appended, reset, forgotten") {
  request_tables t;
  scheduler_output s1;
  const std::vector<token_id> toks{5, 6, 7};
  const std::vector<block_id> b1{4, 9};
  s1.add_chunk(1, toks, 0, b1, true);
  t.apply(s1);
  CHECK(std::vector<block_id>(t.table(1).begin(), t.table(1).end()) == b1);
  scheduler_output s2;
  const std::vector<block_id> b2{3};
  s2.add_chunk(1, std::span(toks).subspan(0, 1), 3, b2);
  t.apply(s2);
  CHECK(std::vector<block_id>(t.table(1).begin(), t.table(1).end()) == std::vector<block_id>{4, 9, 3});
  scheduler_output s3; // preempted and readmitted: a fresh table
  const std::vector<block_id> b3{8};
  s3.add_chunk(1, toks, 0, b3, true);
  t.apply(s3);
  CHECK(std::vector<block_id>(t.table(1).begin(), t.table(1).end()) == b3);
  s3.finished.push_back(1);
  t.forget_finished(s3);
  CHECK(t.size() == 0);
}

TEST_CASE("a mixed step: decodes first, prefill rows in tiles of one sequence, samples in chunk order") {
  request_tables t;
  scheduler_output s;
  const std::vector<token_id> prompt(37, 11), one{42}, other{43};
  // A prefill chunk of 37 tokens after 5 cached, then two decodes.
  const std::vector<block_id> pb{10, 11, 12, 13, 14, 15};
  s.add_chunk(7, prompt, 5, pb, true).sample = true;
  const std::vector<block_id> d1{20, 21};
  s.add_chunk(8, one, 9, d1, true).sample = true;
  const std::vector<block_id> d2{30};
  s.add_chunk(9, other, 0, d2, true).sample = false;
  t.apply(s);
  step_plan p;
  plan_step(s, t, 8, 16, 256, p);
  CHECK(p.num_decode == 2);
  CHECK(p.num_padding == 0); // mixed: no graph
  CHECK_FALSE(p.decode_only());
  CHECK(p.num_seqs == 3);
  REQUIRE(p.num_rows() == 39);
  // Decode rows: request 8 at position 9 (block 21, offset 1), request 9 at 0.
  CHECK(p.tokens[0] == 42);
  CHECK(p.positions[0] == 9);
  CHECK(p.slots[0] == 21 * 8 + 1);
  CHECK(p.context_lens == std::vector<std::int32_t>{10, 1});
  CHECK(p.slots[1] == 30 * 8);
  // Prefill rows: positions 5..41 of request 7.
  CHECK(p.positions[2] == 5);
  CHECK(p.positions[38] == 41);
  CHECK(p.slots[2] == 10 * 8 + 5);
  CHECK(p.slots[38] == 15 * 8 + 1);
  CHECK(p.row_seq[2] == 2);
  CHECK(p.tile_first_row == std::vector<std::int32_t>{2, 18, 34});
  CHECK(p.tile_num_rows == std::vector<std::int32_t>{16, 16, 5});
  // Tables: [seqs, max_blocks], max_blocks from the longest chunk's reach (42 positions: 6 blocks).
  CHECK(p.max_blocks == 6);
  CHECK(std::vector<std::int32_t>(p.block_tables.begin(), p.block_tables.begin() + 6) == std::vector<std::int32_t>{20, 21, 0, 0, 0, 0});
  CHECK(std::vector<std::int32_t>(p.block_tables.begin() + 12, p.block_tables.end()) == std::vector<std::int32_t>{10, 11, 12, 13, 14, 15});
  // Samples in the scheduler's order: the prefill's last row, then request 8's row.
  CHECK(p.sample_chunks == std::vector<std::int32_t>{0, 1});
  CHECK(p.sample_rows == std::vector<std::int32_t>{38, 0});
}

TEST_CASE("a decode-only step is padded to its graph batch size with rows that write nothing") {
  request_tables t;
  scheduler_output s;
  const std::vector<token_id> one{1};
  std::vector<std::vector<block_id>> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back({static_cast<block_id>(i)});
  for (int i = 0; i < 5; ++i) s.add_chunk(100 + i, one, i, blocks[static_cast<std::size_t>(i)], true).sample = true;
  t.apply(s);
  step_plan p;
  plan_step(s, t, 16, 16, 256, p);
  CHECK(p.decode_only());
  CHECK(p.num_decode == 5);
  CHECK(p.num_padding == 3);
  CHECK(p.num_rows() == 8);
  CHECK(p.context_lens == std::vector<std::int32_t>{1, 2, 3, 4, 5, 0, 0, 0});
  CHECK(std::count(p.slots.begin(), p.slots.end(), -1) == 3);
  CHECK(p.block_tables.size() == 8);
  CHECK(p.sample_rows == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  plan_step(s, t, 16, 16, 4, p); // over the largest graph: no padding
  CHECK(p.num_padding == 0);
  CHECK(p.num_rows() == 5);
}
