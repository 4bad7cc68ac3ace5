#pragma once
// A whole file mapped read-only (MAP_PRIVATE), for the checkpoint readers:
// pages are read on first touch, so mapping a 16 GB file costs nothing.

#include <cstddef>
#include <filesystem>

namespace troupe {

struct read_only_map {
  void* data = nullptr; ///< nullptr for an empty file (nothing to map)
  std::size_t size = 0;
};

/// Maps `path`; the caller unmaps it (munmap(data, size)) when data is set.
/// Throws model_error("<path>: cannot open: ..." / "cannot stat: ..." /
/// "not a regular file" / "cannot map: ...").
auto map_read_only(const std::filesystem::path& path) -> read_only_map;

} // namespace troupe
