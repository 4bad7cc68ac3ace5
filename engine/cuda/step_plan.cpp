#include "engine/cuda/step_plan.hpp"

#include "base/check.hpp"

#include <algorithm>

namespace troupe::cuda {

auto graph_batch_size(std::int32_t n, std::int32_t max_graph_batch) -> std::int32_t {
  if (n <= 0 || n > max_graph_batch) return 0;
  const std::int32_t padded = n <= 2 ? n : n <= 4 ? 4 : (n + 7) / 8 * 8;
  return std::min(padded, max_graph_batch);
}

auto graph_batch_sizes(std::int32_t max_graph_batch) -> std::vector<std::int32_t> {
  std::vector<std::int32_t> sizes;
  for (std::int32_t n = 1; n <= max_graph_batch; ++n) {
    const auto s = graph_batch_size(n, max_graph_batch);
    if (sizes.empty() || sizes.back() != s) sizes.push_back(s);
  }
  return sizes;
}

void plan_step(const scheduler_output& step, const request_tables& tables, std::int32_t block_size,
               std::int32_t tile_rows, std::int32_t max_graph_batch, step_plan& out, std::int32_t table_stride) {
  out.tokens.clear();
  out.positions.clear();
  out.slots.clear();
  out.row_seq.clear();
  out.block_tables.clear();
  out.context_lens.clear();
  out.tile_first_row.clear();
  out.tile_num_rows.clear();
  out.sample_rows.clear();
  out.sample_chunks.clear();
  out.num_padding = 0;

  // Sequence order: single-token chunks first, then the rest, each group in
  // the scheduler's order.
  std::vector<std::int32_t> order;
  order.reserve(step.scheduled.size());
  for (std::size_t i = 0; i < step.scheduled.size(); ++i)
    if (step.scheduled[i].num_tokens == 1) order.push_back(static_cast<std::int32_t>(i));
  out.num_decode = static_cast<std::int32_t>(order.size());
  for (std::size_t i = 0; i < step.scheduled.size(); ++i)
    if (step.scheduled[i].num_tokens != 1) order.push_back(static_cast<std::int32_t>(i));
  out.num_seqs = static_cast<std::int32_t>(order.size());

  const bool graph = out.num_decode == out.num_seqs;
  const std::int32_t padded = graph ? graph_batch_size(out.num_decode, max_graph_batch) : 0;
  const std::int32_t seqs_with_padding = std::max(out.num_seqs, padded);

  out.max_blocks = 1;
  for (const auto i : order) {
    const auto& c = step.scheduled[static_cast<std::size_t>(i)];
    const auto t = tables.table(c.id);
    const auto need = (c.num_computed_tokens + c.num_tokens + block_size - 1) / block_size;
    TROUPE_CHECK(static_cast<std::int32_t>(t.size()) >= need, "a block table does not cover its chunk");
    out.max_blocks = std::max(out.max_blocks, need);
  }
  if (table_stride > 0) {
    TROUPE_CHECK(out.max_blocks <= table_stride, "a block table longer than its stride");
    out.max_blocks = table_stride;
  }
  out.block_tables.assign(static_cast<std::size_t>(seqs_with_padding) * static_cast<std::size_t>(out.max_blocks), 0);

  std::vector<std::int32_t> row_of_chunk(step.scheduled.size(), -1); // each chunk's last row
  for (std::int32_t s = 0; s < out.num_seqs; ++s) {
    const auto ci = static_cast<std::size_t>(order[static_cast<std::size_t>(s)]);
    const auto& c = step.scheduled[ci];
    const auto t = tables.table(c.id);
    const auto need = static_cast<std::size_t>((c.num_computed_tokens + c.num_tokens + block_size - 1) / block_size);
    std::copy_n(t.begin(), need, out.block_tables.begin() + static_cast<std::ptrdiff_t>(s) * out.max_blocks);
    const auto tokens = step.tokens_of(c);
    const auto first_row = out.num_rows();
    for (std::int32_t j = 0; j < c.num_tokens; ++j) {
      const std::int32_t pos = c.num_computed_tokens + j;
      if (s >= out.num_decode && j % tile_rows == 0) {
        out.tile_first_row.push_back(first_row + j);
        out.tile_num_rows.push_back(std::min(tile_rows, c.num_tokens - j));
      }
      out.tokens.push_back(tokens[static_cast<std::size_t>(j)]);
      out.positions.push_back(pos);
      out.slots.push_back(t[static_cast<std::size_t>(pos / block_size)] * block_size + pos % block_size);
      out.row_seq.push_back(s);
    }
    if (s < out.num_decode) out.context_lens.push_back(c.num_computed_tokens + 1);
    row_of_chunk[ci] = out.num_rows() - 1;
  }
  // Padding decodes: token 0 at position 0, no slot, no context.
  for (std::int32_t s = out.num_seqs; s < padded; ++s) {
    out.tokens.push_back(0);
    out.positions.push_back(0);
    out.slots.push_back(-1);
    out.row_seq.push_back(s);
    out.context_lens.push_back(0);
    ++out.num_padding;
  }
  for (std::size_t i = 0; i < step.scheduled.size(); ++i)
    if (step.scheduled[i].sample) {
      out.sample_rows.push_back(row_of_chunk[i]);
      out.sample_chunks.push_back(static_cast<std::int32_t>(i));
    }
}

} // namespace troupe::cuda
