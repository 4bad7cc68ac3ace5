#include "engine/formats/gguf.hpp"

#include "engine/formats/mapping.hpp"
#include "engine/formats/model_error.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <system_error>
#include <limits>

namespace troupe::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian");

auto is_gguf_file(const std::filesystem::path& path) -> bool {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

auto traits(std::uint32_t type) -> std::optional<type_traits> {
  // Sizes of the block layouts of ggml (QK = 32 values a block for the
  // legacy types, 256 for the K-quants). Types without a size here are known
  // by name only, and refused by the reader.
  switch (static_cast<tensor_type>(type)) {
    case tensor_type::f32: return type_traits{"F32", 1, 4};
    case tensor_type::f16: return type_traits{"F16", 1, 2};
    case tensor_type::bf16: return type_traits{"BF16", 1, 2};
    case tensor_type::f64: return type_traits{"F64", 1, 8};
    case tensor_type::i8: return type_traits{"I8", 1, 1};
    case tensor_type::i16: return type_traits{"I16", 1, 2};
    case tensor_type::i32: return type_traits{"I32", 1, 4};
    case tensor_type::i64: return type_traits{"I64", 1, 8};
    case tensor_type::q4_0: return type_traits{"Q4_0", 32, 2 + 16};
    case tensor_type::q4_1: return type_traits{"Q4_1", 32, 2 + 2 + 16};
    case tensor_type::q5_0: return type_traits{"Q5_0", 32, 2 + 4 + 16};
    case tensor_type::q5_1: return type_traits{"Q5_1", 32, 2 + 2 + 4 + 16};
    case tensor_type::q8_0: return type_traits{"Q8_0", 32, 2 + 32};
    case tensor_type::q8_1: return type_traits{"Q8_1", 32, 2 + 2 + 32};
    case tensor_type::q2_k: return type_traits{"Q2_K", 256, 16 + 64 + 2 + 2};
    case tensor_type::q3_k: return type_traits{"Q3_K", 256, 32 + 64 + 12 + 2};
    case tensor_type::q4_k: return type_traits{"Q4_K", 256, 2 + 2 + 12 + 128};
    case tensor_type::q5_k: return type_traits{"Q5_K", 256, 2 + 2 + 12 + 32 + 128};
    case tensor_type::q6_k: return type_traits{"Q6_K", 256, 128 + 64 + 16 + 2};
    case tensor_type::q8_k: return type_traits{"Q8_K", 256, 4 + 256 + 32};
    case tensor_type::mxfp4: return type_traits{"MXFP4", 32, 1 + 16};
    case tensor_type::iq2_xxs: return type_traits{"IQ2_XXS", 0, 0};
    case tensor_type::iq2_xs: return type_traits{"IQ2_XS", 0, 0};
    case tensor_type::iq3_xxs: return type_traits{"IQ3_XXS", 0, 0};
    case tensor_type::iq1_s: return type_traits{"IQ1_S", 0, 0};
    case tensor_type::iq4_nl: return type_traits{"IQ4_NL", 0, 0};
    case tensor_type::iq3_s: return type_traits{"IQ3_S", 0, 0};
    case tensor_type::iq2_s: return type_traits{"IQ2_S", 0, 0};
    case tensor_type::iq4_xs: return type_traits{"IQ4_XS", 0, 0};
    case tensor_type::iq1_m: return type_traits{"IQ1_M", 0, 0};
    case tensor_type::tq1_0: return type_traits{"TQ1_0", 0, 0};
    case tensor_type::tq2_0: return type_traits{"TQ2_0", 0, 0};
  }
  return std::nullopt;
}

auto type_name(tensor_type t) -> std::string_view {
  const auto tr = traits(static_cast<std::uint32_t>(t));
  return tr ? tr->name : std::string_view("unknown");
}

namespace {

auto value_type_name(value_type t) -> std::string_view {
  static constexpr std::array<std::string_view, 13> names = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                              "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < names.size() ? names[i] : std::string_view("unknown");
}

} // namespace

auto value::as_uint() const -> std::optional<std::uint64_t> {
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return *u;
  if (const auto* i = std::get_if<std::int64_t>(&v); i && *i >= 0) return static_cast<std::uint64_t>(*i);
  return std::nullopt;
}

auto value::as_int() const -> std::optional<std::int64_t> {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<std::uint64_t>(&v);
      u && *u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return static_cast<std::int64_t>(*u);
  return std::nullopt;
}

auto value::as_double() const -> std::optional<double> {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return static_cast<double>(*u);
  return std::nullopt;
}

auto value::as_bool() const -> std::optional<bool> {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return std::nullopt;
}

auto value::as_string() const -> std::optional<std::string_view> {
  if (const auto* s = std::get_if<std::string_view>(&v)) return *s;
  return std::nullopt;
}

auto value::as_array() const -> const array* {
  if (const auto* a = std::get_if<std::shared_ptr<const array>>(&v)) return a->get();
  return nullptr;
}

auto describe(const value& v) -> std::string {
  if (const auto* a = v.as_array()) return "array of " + std::string(value_type_name(a->type));
  return std::string(value_type_name(v.type));
}

auto tensor::numel() const -> std::int64_t {
  std::int64_t n = 1;
  for (const auto d : ne) n *= d;
  return n;
}

// Reads the mapping front to back; every read is bounds-checked and a failure
// throws the one line naming the file and what was being read.
class reader {
public:
  reader(file& f, const std::byte* data, std::size_t size) : f_(f), data_(data), size_(size) {}

  [[noreturn]] void fail(std::string_view problem) const { troupe::fail(f_.path_, problem); }

  auto remaining() const -> std::size_t { return size_ - at_; }
  auto position() const -> std::size_t { return at_; }

  template <class T>
  auto scalar(std::string_view what) -> T {
    if (remaining() < sizeof(T))
      fail("truncated: the file ends inside " + std::string(what) + " at byte " + std::to_string(at_));
    T out;
    std::memcpy(&out, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return out;
  }

  auto string(std::string_view what) -> std::string_view {
    const auto n = scalar<std::uint64_t>(what);
    if (n > remaining())
      fail("truncated: " + std::string(what) + " claims " + std::to_string(n) + " bytes at byte " +
           std::to_string(at_) + ", past the end of the file");
    const std::string_view s(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return s;
  }

  auto read_value(value_type type, std::string_view what, int depth) -> value {
    value out;
    out.type = type;
    switch (type) {
      case value_type::u8: out.v = std::uint64_t{scalar<std::uint8_t>(what)}; break;
      case value_type::i8: out.v = std::int64_t{scalar<std::int8_t>(what)}; break;
      case value_type::u16: out.v = std::uint64_t{scalar<std::uint16_t>(what)}; break;
      case value_type::i16: out.v = std::int64_t{scalar<std::int16_t>(what)}; break;
      case value_type::u32: out.v = std::uint64_t{scalar<std::uint32_t>(what)}; break;
      case value_type::i32: out.v = std::int64_t{scalar<std::int32_t>(what)}; break;
      case value_type::u64: out.v = scalar<std::uint64_t>(what); break;
      case value_type::i64: out.v = scalar<std::int64_t>(what); break;
      case value_type::f32: out.v = double{scalar<float>(what)}; break;
      case value_type::f64: out.v = scalar<double>(what); break;
      case value_type::boolean: {
        const auto b = scalar<std::uint8_t>(what);
        if (b > 1) fail(std::string(what) + " is a bool of value " + std::to_string(b) + " (0 or 1 expected)");
        out.v = b == 1;
        break;
      }
      case value_type::string: out.v = string(what); break;
      case value_type::array: {
        if (depth >= 4) fail(std::string(what) + ": arrays nested deeper than 4");
        auto a = std::make_shared<array>();
        const auto element = scalar<std::uint32_t>(what);
        if (element > static_cast<std::uint32_t>(value_type::f64))
          fail(std::string(what) + ": unknown array element type " + std::to_string(element));
        a->type = static_cast<value_type>(element);
        const auto n = scalar<std::uint64_t>(what);
        // Every element takes a byte or more: a count beyond the bytes left is a lie.
        if (n > remaining())
          fail("truncated: " + std::string(what) + " claims " + std::to_string(n) + " elements with " +
               std::to_string(remaining()) + " bytes left");
        a->items.reserve(n);
        for (std::uint64_t i = 0; i < n; ++i) a->items.push_back(read_value(a->type, what, depth + 1));
        out.v = std::shared_ptr<const array>(std::move(a));
        break;
      }
      default:
        fail(std::string(what) + ": unknown value type " + std::to_string(static_cast<std::uint32_t>(type)));
    }
    return out;
  }

  void read_all() {
    const auto magic = scalar<std::uint32_t>("the magic");
    if (magic != 0x46554747u) // "GGUF"
      fail("not a GGUF file (its first four bytes are not \"GGUF\")");
    f_.version_ = scalar<std::uint32_t>("the version");
    if (f_.version_ != 2 && f_.version_ != 3)
      fail("GGUF version " + std::to_string(f_.version_) + " is not supported (2 and 3 are)");
    const auto n_tensors = scalar<std::uint64_t>("the tensor count");
    const auto n_keys = scalar<std::uint64_t>("the metadata count");
    // A key takes at least 12 bytes and a tensor info at least 24.
    if (n_keys > remaining() / 12) fail("truncated: " + std::to_string(n_keys) + " metadata entries cannot fit");
    if (n_tensors > remaining() / 24) fail("truncated: " + std::to_string(n_tensors) + " tensors cannot fit");
    read_metadata(n_keys);
    auto spans = read_tensor_infos(n_tensors);
    place_tensors(n_tensors, spans);
  }

private:
  // A tensor's bytes in the data, and its index in the file.
  struct placed {
    std::uint64_t offset, bytes;
    std::size_t index;
  };

  // The n_keys metadata entries, and the alignment they may set.
  void read_metadata(std::uint64_t n_keys) {
    for (std::uint64_t k = 0; k < n_keys; ++k) {
      const auto key = string("metadata key " + std::to_string(k));
      const auto what = "metadata " + std::string(key);
      const auto type = scalar<std::uint32_t>(what);
      if (type > static_cast<std::uint32_t>(value_type::f64))
        fail(what + ": unknown value type " + std::to_string(type));
      auto v = read_value(static_cast<value_type>(type), what, 0);
      if (!f_.metadata_.emplace(key, std::move(v)).second) fail("metadata key " + std::string(key) + " appears twice");
    }
    if (const auto* a = f_.find("general.alignment")) {
      const auto n = a->as_uint();
      if (!n || *n == 0 || (*n & (*n - 1)) != 0 || *n > 65536)
        fail("general.alignment must be a power of two up to 65536 (got " + describe(*a) + ")");
      f_.alignment_ = *n;
    }
  }

  // Reads the tensor infos into the file; where each one's bytes lie.
  auto read_tensor_infos(std::uint64_t n_tensors) -> std::vector<placed> {
    std::vector<placed> spans;
    for (std::uint64_t t = 0; t < n_tensors; ++t) {
      tensor info;
      info.name = string("tensor name " + std::to_string(t));
      const auto what = "tensor " + std::string(info.name);
      const auto dims = scalar<std::uint32_t>(what);
      if (dims == 0 || dims > 4) fail(what + " has " + std::to_string(dims) + " dimensions (1 to 4 expected)");
      std::int64_t numel = 1;
      for (std::uint32_t d = 0; d < dims; ++d) {
        const auto n = scalar<std::uint64_t>(what);
        if (n == 0 || n > (std::uint64_t{1} << 40) ||
            static_cast<std::uint64_t>(numel) > (std::uint64_t{1} << 48) / n)
          fail(what + " has an impossible dimension " + std::to_string(n));
        info.ne.push_back(static_cast<std::int64_t>(n));
        numel *= static_cast<std::int64_t>(n);
      }
      const auto type = scalar<std::uint32_t>(what);
      const auto tr = traits(type);
      if (!tr) fail(what + " has an unknown type " + std::to_string(type));
      if (tr->block_elements == 0)
        fail(what + " has type " + std::string(tr->name) + ", which troupe does not read");
      info.type = static_cast<tensor_type>(type);
      if (info.ne[0] % tr->block_elements != 0)
        fail(what + " is " + std::string(tr->name) + " with rows of " + std::to_string(info.ne[0]) +
             " values, not whole blocks of " + std::to_string(tr->block_elements));
      const auto offset = scalar<std::uint64_t>(what);
      if (offset % f_.alignment_ != 0)
        fail(what + " starts at offset " + std::to_string(offset) + ", not a multiple of the alignment " +
             std::to_string(f_.alignment_));
      info.num_bytes = static_cast<std::size_t>(numel / tr->block_elements * tr->block_bytes);
      spans.push_back({offset, info.num_bytes, f_.tensors_.size()});
      if (!f_.index_.emplace(info.name, f_.tensors_.size()).second)
        fail("tensor " + std::string(info.name) + " appears twice");
      f_.tensors_.push_back(std::move(info));
    }
    return spans;
  }

  // Points each tensor at its data, which must lie in the file without overlaps.
  void place_tensors(std::uint64_t n_tensors, std::vector<placed>& spans) {
    const auto data_start = (at_ + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    if (n_tensors > 0 && data_start > size_) fail("truncated: the file ends before its tensor data");
    const auto data_bytes = n_tensors > 0 ? size_ - data_start : 0;
    std::sort(spans.begin(), spans.end(), [](const placed& a, const placed& b) { return a.offset < b.offset; });
    std::uint64_t end = 0;
    for (const auto& s : spans) {
      auto& info = f_.tensors_[s.index];
      if (s.offset > data_bytes || s.bytes > data_bytes - s.offset)
        fail("truncated: tensor " + std::string(info.name) + " (" + std::to_string(s.bytes) + " bytes at offset " +
             std::to_string(s.offset) + ") runs past the end of the file");
      if (s.offset < end) fail("tensor " + std::string(info.name) + " overlaps the tensor before it");
      end = s.offset + s.bytes;
      info.data = data_ + data_start + s.offset;
    }
  }

  file& f_;
  const std::byte* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

auto file::open(const std::filesystem::path& path) -> std::shared_ptr<const file> {
  std::shared_ptr<file> f(new file());
  f->path_ = path;
  const auto m = map_read_only(path);
  f->map_ = m.data; // unmapped by the destructor from here on
  f->map_bytes_ = m.size;
  if (m.size < 24) fail(path, "truncated: " + std::to_string(m.size) + " bytes, shorter than a GGUF header");
  reader r(*f, static_cast<const std::byte*>(m.data), m.size);
  r.read_all();
  return f;
}

file::~file() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

auto file::find(std::string_view key) const -> const value* {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

auto file::find_tensor(std::string_view name) const -> const tensor* {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void wrong_type(const file& f, std::string_view key, const value* v, std::string_view want) {
  if (v == nullptr) troupe::fail(f.path(), "the metadata has no " + std::string(key));
  troupe::fail(f.path(), "metadata " + std::string(key) + " is " + describe(*v) + ", not " + std::string(want));
}

} // namespace

auto file::require_uint(std::string_view key) const -> std::uint64_t {
  const auto* v = find(key);
  if (v != nullptr)
    if (const auto n = v->as_uint()) return *n;
  wrong_type(*this, key, v, "a non-negative integer");
}

auto file::require_double(std::string_view key) const -> double {
  const auto* v = find(key);
  if (v != nullptr)
    if (const auto d = v->as_double()) return *d;
  wrong_type(*this, key, v, "a number");
}

auto file::require_string(std::string_view key) const -> std::string_view {
  const auto* v = find(key);
  if (v != nullptr)
    if (const auto s = v->as_string()) return *s;
  wrong_type(*this, key, v, "a string");
}

auto file::require_array(std::string_view key) const -> const array& {
  const auto* v = find(key);
  if (v != nullptr)
    if (const auto* a = v->as_array()) return *a;
  wrong_type(*this, key, v, "an array");
}

} // namespace troupe::gguf
