#pragma once
// The host side of a CUDA step, in plain C++ (built into troupe_engine and
// tested on any machine): the flat arrays the kernels read, and the padded
// batch sizes decode steps are captured at as CUDA graphs.

#include "engine/core/scheduler_output.hpp"
#include "engine/request_tables.hpp"

#include <cstdint>
#include <vector>

namespace troupe::cuda {

/// The padded batch size a decode step of n sequences runs at with CUDA
/// graphs (1, 2, 4, 8, then multiples of 8, as vLLM captures), or 0 when n
/// exceeds max_graph_batch (the step runs without a graph).
auto graph_batch_size(std::int32_t n, std::int32_t max_graph_batch) -> std::int32_t;
/// Every size graph_batch_size can return for max_graph_batch, ascending.
auto graph_batch_sizes(std::int32_t max_graph_batch) -> std::vector<std::int32_t>;

/// One step flattened for the kernels. Rows are tokens: first one row per
/// single-token chunk (the decode attention kernel's), then the longer
/// chunks' rows (prefill attention's, in tiles of at most tile_rows rows of
/// one sequence). Sequences are numbered in that order.
struct step_plan {
  std::vector<std::int32_t> tokens;    ///< [rows]
  std::vector<std::int32_t> positions; ///< [rows]
  std::vector<std::int32_t> slots;     ///< [rows]: block * block_size + offset; -1 for padding
  std::vector<std::int32_t> row_seq;   ///< [rows]: the row's sequence
  std::int32_t num_decode = 0;         ///< rows [0, num_decode): one per decode sequence
  std::int32_t num_padding = 0;        ///< decode rows appended to reach the graph batch size
  std::int32_t num_seqs = 0;
  std::int32_t max_blocks = 0;          ///< columns of block_tables
  std::vector<std::int32_t> block_tables; ///< [num_seqs, max_blocks], unused entries 0
  std::vector<std::int32_t> context_lens; ///< [decode rows incl. padding]: position + 1, 0 for padding
  std::vector<std::int32_t> tile_first_row, tile_num_rows; ///< prefill tiles
  /// The rows whose logits are sampled, in the order of the scheduler's
  /// chunks (which is the order of step_result::sampled), and those chunks.
  std::vector<std::int32_t> sample_rows;
  std::vector<std::int32_t> sample_chunks;

  auto num_rows() const -> std::int32_t { return static_cast<std::int32_t>(tokens.size()); }
  /// A decode-only step (every chunk one token), the kind captured as a graph.
  auto decode_only() const -> bool { return num_rows() == num_decode + num_padding; }
};

/// Plans `step` (tables already applied). A decode-only step of at most
/// max_graph_batch sequences is padded to graph_batch_size (0: no padding).
/// table_stride > 0 fixes block_tables' row length (a captured graph reads
/// them at a fixed stride); 0 fits it to the longest table.
void plan_step(const scheduler_output& step, const request_tables& tables, std::int32_t block_size,
               std::int32_t tile_rows, std::int32_t max_graph_batch, step_plan& out, std::int32_t table_stride = 0);

} // namespace troupe::cuda
