#pragma once
// A small GGUF writer of the tests' own (not troupe's): metadata and tensors
// laid out as llama.cpp's gguf.py lays them out (version 3, the header, the
// tensor infos, padding to the alignment, each tensor's bytes padded to the
// alignment). The raw pieces (u32, u64, str) build broken files too.

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::testing {

class gguf_writer {
public:
  // Value type numbers of the format.
  enum : std::uint32_t { t_u8 = 0, t_i8, t_u16, t_i16, t_u32, t_i32, t_f32, t_bool, t_string, t_array, t_u64,
                         t_i64, t_f64 };

  static void u32(std::string& out, std::uint32_t v) { raw(out, &v, 4); }
  static void u64(std::string& out, std::uint64_t v) { raw(out, &v, 8); }
  static void str(std::string& out, std::string_view s) {
    u64(out, s.size());
    out += s;
  }

  void kv_u32(std::string_view key, std::uint32_t v) { begin(key, t_u32), u32(kv_, v); }
  void kv_i32(std::string_view key, std::int32_t v) { begin(key, t_i32), raw(kv_, &v, 4); }
  void kv_u64(std::string_view key, std::uint64_t v) { begin(key, t_u64), u64(kv_, v); }
  void kv_f32(std::string_view key, float v) { begin(key, t_f32), raw(kv_, &v, 4); }
  void kv_bool(std::string_view key, bool v) { begin(key, t_bool), kv_ += static_cast<char>(v ? 1 : 0); }
  void kv_string(std::string_view key, std::string_view v) { begin(key, t_string), str(kv_, v); }
  void kv_strings(std::string_view key, const std::vector<std::string>& v) {
    begin(key, t_array);
    u32(kv_, t_string);
    u64(kv_, v.size());
    for (const auto& s : v) str(kv_, s);
  }
  void kv_i32s(std::string_view key, const std::vector<std::int32_t>& v) {
    begin(key, t_array);
    u32(kv_, t_i32);
    u64(kv_, v.size());
    for (const auto x : v) raw(kv_, &x, 4);
  }
  void kv_f32s(std::string_view key, const std::vector<float>& v) {
    begin(key, t_array);
    u32(kv_, t_f32);
    u64(kv_, v.size());
    for (const auto x : v) raw(kv_, &x, 4);
  }
  /// A key with its value bytes as given (for values of odd types).
  void kv_raw(std::string_view key, std::uint32_t type, std::string_view value_bytes) {
    begin(key, type);
    kv_ += value_bytes;
  }

  /// A tensor: ne as the file stores it (ne[0] fastest), its type number and bytes.
  void tensor(std::string_view name, std::vector<std::uint64_t> ne, std::uint32_t type, std::string bytes) {
    tensors_.push_back({std::string(name), std::move(ne), type, std::move(bytes)});
  }
  template <class T>
  void tensor(std::string_view name, std::vector<std::uint64_t> ne, std::uint32_t type, std::span<const T> values) {
    tensor(name, std::move(ne), type, std::string(reinterpret_cast<const char*>(values.data()), values.size_bytes()));
  }

  /// The whole file. alignment: what general.alignment says (written as a key
  /// when not 32) and what the layout follows.
  auto bytes(std::uint32_t alignment = 32, std::uint32_t version = 3) const -> std::string {
    std::string kv = kv_;
    std::uint64_t keys = num_keys_;
    if (alignment != 32) {
      str(kv, "general.alignment");
      u32(kv, t_u32);
      u32(kv, alignment);
      ++keys;
    }
    std::string out = "GGUF";
    u32(out, version);
    u64(out, tensors_.size());
    u64(out, keys);
    out += kv;
    std::uint64_t offset = 0;
    for (const auto& t : tensors_) {
      str(out, t.name);
      u32(out, static_cast<std::uint32_t>(t.ne.size()));
      for (const auto n : t.ne) u64(out, n);
      u32(out, t.type);
      u64(out, offset);
      offset += padded(t.bytes.size(), alignment);
    }
    out.resize(padded(out.size(), alignment), '\0');
    for (const auto& t : tensors_) {
      out += t.bytes;
      out.resize(padded(out.size(), alignment), '\0');
    }
    return out;
  }

  void write(const std::filesystem::path& path, std::uint32_t alignment = 32) const {
    const auto b = bytes(alignment);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
  }

private:
  struct entry {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
    std::string bytes;
  };

  static void raw(std::string& out, const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); }
  static auto padded(std::size_t n, std::size_t a) -> std::size_t { return (n + a - 1) / a * a; }
  void begin(std::string_view key, std::uint32_t type) {
    str(kv_, key);
    u32(kv_, type);
    ++num_keys_;
  }

  std::string kv_;
  std::uint64_t num_keys_ = 0;
  std::vector<entry> tensors_;
};

} // namespace troupe::testing
