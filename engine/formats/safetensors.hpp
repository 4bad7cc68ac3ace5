#pragma once
// The safetensors checkpoint format (Hugging Face): an 8-byte little-endian
// header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the tensor bytes; offsets count from the first byte after the header.

#include "base/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// One tensor of an open safetensors_file; valid while the file object lives.
struct tensor_info {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape; ///< empty for a scalar
  /// The elements, row-major, always aligned to dtype_size(type). Points into
  /// the read-only mapping when the file puts it at an aligned address (every
  /// file the reference implementation or safetensors_writer writes with
  /// wider dtypes first); otherwise into a copy the file object owns.
  const std::byte* data = nullptr;
  std::size_t num_bytes = 0; ///< == numel() * dtype_size(type)

  auto numel() const -> std::int64_t;
};

/// "[32, 64]": a shape as error messages print it.
auto format_shape(std::span<const std::int64_t> shape) -> std::string;

/// A read-only memory mapping of one safetensors file, validated on open.
/// Pages are read on first touch, so opening a 16 GB file costs only its header.
class safetensors_file {
public:
  /// Maps and validates the file. Throws model_error("<file>: <problem>") for a
  /// missing or short file, a bad header length, a header that is not a JSON
  /// object, a malformed entry, an unsupported dtype, offsets reversed or past
  /// the data, a byte size that does not match the shape, or overlapping tensors.
  static auto open(const std::filesystem::path& file) -> std::shared_ptr<const safetensors_file>;

  safetensors_file(const safetensors_file&) = delete;
  auto operator=(const safetensors_file&) -> safetensors_file& = delete;
  ~safetensors_file();

  /// All tensors, in header order.
  auto tensors() const -> const std::vector<tensor_info>&;
  /// The tensor called name, or nullptr. O(log n).
  auto find(std::string_view name) const -> const tensor_info*;
  /// The "__metadata__" map; empty when the header has none.
  auto metadata() const -> const std::map<std::string, std::string>&;
  auto path() const -> const std::filesystem::path&;

private:
  safetensors_file() = default;
  void parse_header(std::string_view header, std::uint64_t data_offset);

  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::vector<tensor_info> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::unique_ptr<std::byte[]>> aligned_copies_;
};

/// Declares one tensor of a file that safetensors_writer streams.
struct tensor_spec {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
};

/// Streams a file: header first, then tensor bytes in spec order, so an 16 GB
/// checkpoint never sits in memory. Tensors are laid out back to back in spec
/// order (no holes, as the reference reader demands): list F32 tensors before
/// F16/BF16 ones so every tensor lands aligned. A writer destroyed before a
/// successful finish() removes its partial file.
class safetensors_writer {
public:
  /// Creates (truncates) file and writes the header. Throws model_error on a
  /// duplicate or reserved name, a negative dimension, or an I/O error.
  safetensors_writer(const std::filesystem::path& file, std::vector<tensor_spec> specs,
                     const std::map<std::string, std::string>& metadata = {});
  safetensors_writer(const safetensors_writer&) = delete;
  auto operator=(const safetensors_writer&) -> safetensors_writer& = delete;
  ~safetensors_writer();

  /// Appends bytes (which may span tensor boundaries). Throws model_error if
  /// they would run past the total the specs declare, or on an I/O error.
  void write(std::span<const std::byte> bytes);
  /// Closes the file. Throws model_error unless exactly all bytes were written.
  void finish();

  /// Bytes of tensor data the specs declare, and how many were written so far.
  auto num_bytes_total() const -> std::uint64_t { return num_bytes_total_; }
  auto num_bytes_written() const -> std::uint64_t { return num_bytes_written_; }

private:
  struct file_closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  [[noreturn]] void fail(const std::string& problem);

  std::filesystem::path path_;
  std::unique_ptr<std::FILE, file_closer> file_;
  std::uint64_t num_bytes_total_ = 0;
  std::uint64_t num_bytes_written_ = 0;
  bool finished_ = false;
};

/// One in-memory tensor for write_safetensors.
struct tensor_to_write {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes; ///< numel * dtype_size(type) bytes
};

/// Writes a whole file at once. Orders tensors by element size, widest first
/// (stable otherwise), so every tensor is aligned in the file. Throws
/// model_error when a tensor's byte count does not match its shape.
void write_safetensors(const std::filesystem::path& file, std::span<const tensor_to_write> tensors,
                       const std::map<std::string, std::string>& metadata = {});

} // namespace troupe
