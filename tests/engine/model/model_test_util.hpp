#pragma once
// Helpers shared by the engine/model tests: raw files and catching a
// model_error's message.

#include "engine/formats/model_error.hpp"
#include "tests/support/temp_dir.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::test {

using temp_dir = troupe::testing::temp_dir;

inline void write_file(const std::filesystem::path& file, std::string_view bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

inline auto read_file(const std::filesystem::path& file) -> std::string {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The message of the model_error that f throws; "" when it throws none.
/// Any other exception propagates and fails the test.
template <class F>
auto error_of(F&& f) -> std::string {
  try {
    f();
  } catch (const model_error& e) {
    return e.what();
  }
  return "";
}

/// An 8-byte little-endian length followed by header, then data: a safetensors
/// file built by hand, valid or not.
inline auto raw_safetensors(std::string_view header, std::string_view data = {},
                            std::uint64_t header_length = UINT64_MAX) -> std::string {
  if (header_length == UINT64_MAX) header_length = header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(header_length >> (8 * i));
  out += header;
  out += data;
  return out;
}

template <class T>
auto bytes_of(const std::vector<T>& v) -> std::span<const std::byte> {
  return std::as_bytes(std::span<const T>(v));
}

} // namespace troupe::test
