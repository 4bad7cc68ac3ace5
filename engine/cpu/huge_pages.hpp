#pragma once
// Memory in 2 MiB pages for what the CPU backend streams every step: the
// weights and the KV cache.

#include "engine/model/model_weights.hpp"

#include <cstddef>
#include <memory>

namespace troupe {

/// An anonymous mapping of at least `bytes`, starting on a 2 MiB boundary and
/// advised MADV_HUGEPAGE; unmapped with its last owner. Pages are zeroed by
/// the kernel on first touch. Throws std::bad_alloc when mmap fails.
auto map_huge_pages(std::size_t bytes) -> std::shared_ptr<std::byte>;

/// Copies every weight tensor of `w` into one map_huge_pages region,
/// repoints the tensors there and drops the file mappings. The matrices are
/// written packed16 (16 rows' elements of a column side by side), the
/// layout in which decode streams its weights with no horizontal sums.
/// Decode streams every weight once per step: with 4 KiB pages a
/// stories110m step takes ~107,000 TLB misses, and measured here the GEMV
/// reads 10 % faster from huge pages. Costs one copy of the weights at start
/// (the page cache keeps the file, reclaimably). A mixture of experts'
/// quantized experts are the exception: they stay in the file's mapping
/// (mostly cold, each read only when chosen), which `w` then keeps.
/// Throws std::bad_alloc when the mapping fails; `w` is then unchanged.
void place_in_huge_pages(model_weights& w);

} // namespace troupe
