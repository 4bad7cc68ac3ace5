#pragma once
// How a weight matrix lies in memory.

#include <cstdint>

namespace troupe {

enum class weight_layout : std::uint8_t {
  /// [rows, cols], as in the checkpoint.
  row_major,
  /// Rows in groups of 16, each group [cols, 16]: element (r, c) at
  /// (r / 16) · 16 · cols + 16 · c + r % 16; rows padded to a multiple of
  /// 16 with zeros. Sixteen rows' elements of one column fill one vector,
  /// so a matrix-vector product streams the weights with no horizontal sum
  /// (the CPU backend's layout, see pack_weights).
  packed16,
};

} // namespace troupe
