#pragma once
// GGUF, llama.cpp's model file (versions 2 and 3; little-endian):
//   "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: { string key, u32 value type, value }...,
//   tensor infos: { string name, u32 dims, u64 ne[dims], u32 type, u64 offset }...,
//   padding to general.alignment (32 unless the metadata says), tensor data.
// A string is a u64 byte count and the bytes; an array a u32 element type, a
// u64 count and the elements. ne[0] is the fastest-varying dimension (a
// matrix of `rows` rows of `cols` elements has ne = {cols, rows}); offsets
// count from the start of the data and are multiples of the alignment.
//
// This reader maps the file and validates all of it on open; what the
// tensors mean (names, the architecture's hyperparameters, the tokenizer) is
// for its callers.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::gguf {

/// Whether path is a regular file that starts with GGUF's magic: a model
/// given as one file instead of a directory.
auto is_gguf_file(const std::filesystem::path& path) -> bool;

/// ggml's tensor types, numbered as in the file. The block-quantized types
/// store `block_elements` values in `block_bytes`.
enum class tensor_type : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30, tq1_0 = 34, tq2_0 = 35,
  mxfp4 = 39,
};

struct type_traits {
  std::string_view name;          ///< "Q4_K", as llama.cpp prints it
  std::int64_t block_elements = 0;
  std::int64_t block_bytes = 0;
};

/// The traits of a type number, or nullopt for a number this reader does not know.
auto traits(std::uint32_t type) -> std::optional<type_traits>;
auto type_name(tensor_type t) -> std::string_view;

/// The metadata value types, numbered as in the file.
enum class value_type : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
  u64 = 10, i64 = 11, f64 = 12,
};

struct value;
/// An array's elements, all of one type (arrays of arrays are allowed).
struct array {
  value_type type = value_type::u8;
  std::vector<value> items;
};

/// One metadata value. Integers are kept as read (signed or not), strings as
/// views into the mapping (valid while the file lives).
struct value {
  value_type type = value_type::u8;
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string_view, std::shared_ptr<const array>> v;

  /// A non-negative integer of any integer type; nullopt otherwise.
  auto as_uint() const -> std::optional<std::uint64_t>;
  /// An integer of any integer type that fits an int64; nullopt otherwise.
  auto as_int() const -> std::optional<std::int64_t>;
  /// A float or an integer, as a double; nullopt otherwise.
  auto as_double() const -> std::optional<double>;
  auto as_bool() const -> std::optional<bool>;
  auto as_string() const -> std::optional<std::string_view>;
  auto as_array() const -> const array*;
};

/// "u32", "string", "array of string": a type as error messages print it.
auto describe(const value& v) -> std::string;

struct tensor {
  std::string_view name;
  tensor_type type = tensor_type::f32;
  /// The dimensions as the file gives them: ne[0] fastest-varying.
  std::vector<std::int64_t> ne;
  const std::byte* data = nullptr; ///< into the mapping, aligned to the file's alignment
  std::size_t num_bytes = 0;

  auto numel() const -> std::int64_t;
};

/// A read-only memory mapping of one GGUF file, validated on open: pages are
/// read on first touch, so opening a 5 GB file costs its metadata.
class file {
public:
  /// Maps and validates the file. Throws model_error("<file>: <problem>") for
  /// a missing, truncated or oversized-count file, a wrong magic, a version
  /// other than 2 or 3, an unknown metadata value type, a string or array
  /// running past the end, a duplicate key or tensor name, a tensor of
  /// unknown type or with 0 or more than 4 dimensions, a negative or
  /// overflowing shape, a row not made of whole blocks, a misaligned offset,
  /// data past the end of the file, or overlapping tensors.
  static auto open(const std::filesystem::path& path) -> std::shared_ptr<const file>;

  file(const file&) = delete;
  auto operator=(const file&) -> file& = delete;
  ~file();

  auto version() const -> std::uint32_t { return version_; }
  auto alignment() const -> std::uint64_t { return alignment_; }
  auto path() const -> const std::filesystem::path& { return path_; }

  /// The metadata, by key.
  auto metadata() const -> const std::map<std::string_view, value, std::less<>>& { return metadata_; }
  /// The value of key, or nullptr.
  auto find(std::string_view key) const -> const value*;
  /// The tensors, in file order.
  auto tensors() const -> const std::vector<tensor>& { return tensors_; }
  /// The tensor called name, or nullptr.
  auto find_tensor(std::string_view name) const -> const tensor*;

  /// Typed reads of required keys: throw model_error("<file>: <what>")
  /// naming the key when it is missing or of another type.
  auto require_uint(std::string_view key) const -> std::uint64_t;
  auto require_double(std::string_view key) const -> double;
  auto require_string(std::string_view key) const -> std::string_view;
  auto require_array(std::string_view key) const -> const array&;

private:
  file() = default;

  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::map<std::string_view, value, std::less<>> metadata_;
  std::vector<tensor> tensors_;
  std::map<std::string_view, std::size_t, std::less<>> index_;

  friend class reader;
};

} // namespace troupe::gguf
