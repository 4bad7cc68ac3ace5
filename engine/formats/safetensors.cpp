#include "engine/formats/safetensors.hpp"

#include "base/json_text.hpp"
#include "engine/formats/mapping.hpp"
#include "engine/formats/model_error.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <set>
#include <sys/mman.h>

namespace troupe {

namespace {

// The reference implementation refuses larger headers too.
constexpr std::uint64_t max_header_bytes = 100'000'000;

auto in_quotes(std::string_view name) -> std::string {
  return "'" + std::string(name) + "'";
}

/// Element count of shape; false on overflow (a header could claim 2^40 x 2^40).
auto checked_numel(std::span<const std::int64_t> shape, std::uint64_t& numel) -> bool {
  numel = 1;
  for (const auto d : shape)
    if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel)) return false;
  return true;
}

struct extent {
  std::uint64_t begin;
  std::uint64_t end;
  std::size_t index;
};

/// A header entry's "data_offsets": exactly two unsigned integers.
auto read_data_offsets(simdjson::dom::element offsets_json, std::uint64_t (&offsets)[2]) -> bool {
  simdjson::dom::array offsets_array;
  std::size_t num_offsets = 0;
  bool offsets_ok = offsets_json.get_array().get(offsets_array) == simdjson::SUCCESS;
  if (offsets_ok) {
    for (const auto o : offsets_array) {
      if (num_offsets == 2 || o.get_uint64().get(offsets[num_offsets]) != simdjson::SUCCESS) {
        offsets_ok = false;
        break;
      }
      ++num_offsets;
    }
  }
  return offsets_ok && num_offsets == 2;
}

/// A tensor's header entry, checked, and the bytes it spans of the data.
struct header_entry {
  tensor_info info; ///< all but data
  std::uint64_t begin;
  std::uint64_t end;
};

/// Reads and checks one tensor's entry against the data's size.
auto read_entry(const std::filesystem::path& path, std::string_view name, simdjson::dom::element value,
                std::uint64_t data_bytes) -> header_entry {
  namespace dom = simdjson::dom;
  const auto problem = [&](const std::string& what) { fail(path, "tensor " + in_quotes(name) + " " + what); };
  dom::object entry;
  if (value.get_object().get(entry) != simdjson::SUCCESS) problem("is not an object");

  dom::element dtype_json, shape_json, offsets_json;
  if (entry["dtype"].get(dtype_json) != simdjson::SUCCESS) problem("has no dtype");
  if (entry["shape"].get(shape_json) != simdjson::SUCCESS) problem("has no shape");
  if (entry["data_offsets"].get(offsets_json) != simdjson::SUCCESS) problem("has no data_offsets");

  std::string_view dtype_text;
  if (dtype_json.get_string().get(dtype_text) != simdjson::SUCCESS) problem("has a dtype that is not a string");
  const auto type = parse_dtype(dtype_text);
  if (!type) problem("has unsupported dtype " + std::string(dtype_text));

  tensor_info info;
  info.name = std::string(name);
  info.type = *type;
  dom::array shape_array;
  if (shape_json.get_array().get(shape_array) != simdjson::SUCCESS)
    problem("has a shape that is not an array of non-negative integers");
  for (const auto d : shape_array) {
    std::int64_t dim = 0;
    if (d.get_int64().get(dim) != simdjson::SUCCESS || dim < 0)
      problem("has a shape that is not an array of non-negative integers");
    info.shape.push_back(dim);
  }

  std::uint64_t offsets[2] = {0, 0};
  if (!read_data_offsets(offsets_json, offsets)) problem("has data_offsets that are not [begin, end]");
  const auto [begin, end] = offsets;
  const auto offsets_text = "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end) problem("has reversed data_offsets " + offsets_text);
  if (end > data_bytes)
    problem("has data_offsets " + offsets_text + " beyond the " + std::to_string(data_bytes) + " bytes of data");

  std::uint64_t numel = 0;
  std::uint64_t expected = 0;
  if (!checked_numel(info.shape, numel) || __builtin_mul_overflow(numel, dtype_size(info.type), &expected))
    problem("has shape " + format_shape(info.shape) + " too large to address");
  info.num_bytes = static_cast<std::size_t>(end - begin);
  if (end - begin != expected)
    problem("has " + std::to_string(end - begin) + " bytes, expected " + std::to_string(expected) + " for " +
            std::string(dtype_name(info.type)) + " shape " + format_shape(info.shape));
  return {std::move(info), begin, end};
}

/// The "__metadata__" object's strings, into out.
void read_metadata(const std::filesystem::path& path, simdjson::dom::element value,
                   std::map<std::string, std::string>& out) {
  simdjson::dom::object meta;
  if (value.get_object().get(meta) != simdjson::SUCCESS) fail(path, "__metadata__ is not an object of strings");
  for (const auto kv : meta) {
    std::string_view text;
    if (kv.value.get_string().get(text) != simdjson::SUCCESS) fail(path, "__metadata__ is not an object of strings");
    out[std::string(kv.key)] = std::string(text);
  }
}

/// Fails where two non-empty tensors share bytes.
void check_overlaps(const std::filesystem::path& path, std::vector<extent>& extents,
                    const std::vector<tensor_info>& tensors) {
  // Overlap: sort by begin and compare each non-empty tensor with the furthest
  // end seen so far; empty tensors occupy no bytes and overlap nothing.
  std::sort(extents.begin(), extents.end(),
            [](const extent& a, const extent& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const extent* furthest = nullptr;
  for (const auto& e : extents) {
    if (e.begin == e.end) continue;
    if (furthest != nullptr && e.begin < furthest->end)
      fail(path, "tensors " + in_quotes(tensors[furthest->index].name) + " and " + in_quotes(tensors[e.index].name) +
                     " overlap");
    if (furthest == nullptr || e.end > furthest->end) furthest = &e;
  }
}

} // namespace

auto tensor_info::numel() const -> std::int64_t {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

auto format_shape(std::span<const std::int64_t> shape) -> std::string {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

auto safetensors_file::open(const std::filesystem::path& file) -> std::shared_ptr<const safetensors_file> {
  std::shared_ptr<safetensors_file> f(new safetensors_file());
  f->path_ = file;
  const auto m = map_read_only(file);
  f->map_ = m.data; // unmapped by the destructor from here on
  f->map_bytes_ = m.size;
  const auto size = static_cast<std::uint64_t>(m.size);
  if (size < 8)
    fail(file, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");

  const auto* base = static_cast<const std::byte*>(m.data);
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | std::to_integer<std::uint64_t>(base[i]);
  if (header_bytes > size - 8)
    fail(file, "header length " + std::to_string(header_bytes) + " exceeds file size " + std::to_string(size));
  if (header_bytes > max_header_bytes)
    fail(file, "header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                   std::to_string(max_header_bytes));
  f->parse_header({reinterpret_cast<const char*>(base + 8), header_bytes}, 8 + header_bytes);
  return f;
}

safetensors_file::~safetensors_file() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

void safetensors_file::parse_header(std::string_view header, std::uint64_t data_offset) {
  namespace dom = simdjson::dom;
  const std::uint64_t data_bytes = map_bytes_ - data_offset;
  const simdjson::padded_string json(header.data(), header.size());
  dom::parser parser;
  dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) fail(path_, "header is not valid JSON");
  dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) fail(path_, "header is not a JSON object");

  std::vector<extent> extents;
  for (const auto field : root) {
    const std::string_view name = field.key;
    if (name == "__metadata__") {
      read_metadata(path_, field.value, metadata_);
      continue;
    }
    auto [info, begin, end] = read_entry(path_, name, field.value, data_bytes);
    info.data = static_cast<const std::byte*>(map_) + data_offset + begin;
    if (reinterpret_cast<std::uintptr_t>(info.data) % dtype_size(info.type) != 0) {
      // Foreign files may misalign a tensor; consumers may then read F32 data
      // through a float*, so give them an aligned copy (new[] aligns to 16).
      auto& copy = aligned_copies_.emplace_back(new std::byte[info.num_bytes]);
      std::memcpy(copy.get(), info.data, info.num_bytes);
      info.data = copy.get();
    }
    if (!index_.emplace(info.name, tensors_.size()).second) fail(path_, "tensor " + in_quotes(name) + " appears twice");
    extents.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(info));
  }
  check_overlaps(path_, extents, tensors_);
}

auto safetensors_file::tensors() const -> const std::vector<tensor_info>& { return tensors_; }

auto safetensors_file::find(std::string_view name) const -> const tensor_info* {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

auto safetensors_file::metadata() const -> const std::map<std::string, std::string>& { return metadata_; }

auto safetensors_file::path() const -> const std::filesystem::path& { return path_; }

// --- writing ---

safetensors_writer::safetensors_writer(const std::filesystem::path& file, std::vector<tensor_spec> specs,
                                       const std::map<std::string, std::string>& metadata)
    : path_(file) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      if (header.back() != '{') header += ',';
      json_text::append_string(header, key);
      header += ':';
      json_text::append_string(header, value);
    }
    header += '}';
  }
  std::set<std::string_view> names;
  for (const auto& spec : specs) {
    if (spec.name == "__metadata__") fail("tensor name '__metadata__' is reserved");
    if (!names.insert(spec.name).second) fail("tensor " + in_quotes(spec.name) + " appears twice");
    if (std::any_of(spec.shape.begin(), spec.shape.end(), [](std::int64_t d) { return d < 0; }))
      fail("tensor " + in_quotes(spec.name) + " has negative dimensions in shape " + format_shape(spec.shape));
    std::uint64_t numel = 0;
    std::uint64_t bytes = 0;
    std::uint64_t end = 0;
    if (!checked_numel(spec.shape, numel) || __builtin_mul_overflow(numel, dtype_size(spec.type), &bytes) ||
        __builtin_add_overflow(num_bytes_total_, bytes, &end))
      fail("tensor " + in_quotes(spec.name) + " has shape " + format_shape(spec.shape) + " too large to address");
    if (header.size() > 1) header += ',';
    json_text::append_string(header, spec.name);
    header += ":{\"dtype\":";
    json_text::append_string(header, dtype_name(spec.type));
    header += ",\"shape\":[";
    for (std::size_t i = 0; i < spec.shape.size(); ++i) {
      if (i > 0) header += ',';
      json_text::append_number(header, spec.shape[i]);
    }
    header += "],\"data_offsets\":[";
    json_text::append_number(header, num_bytes_total_);
    header += ',';
    json_text::append_number(header, end);
    header += "]}";
    num_bytes_total_ = end;
  }
  header += '}';
  // Spaces up to a multiple of 8, as the reference writer pads, so the data
  // starts 8-aligned in the file (and in a page-aligned mapping of it).
  header.append((8 - header.size() % 8) % 8, ' ');

  file_.reset(std::fopen(path_.c_str(), "wb"));
  if (!file_) fail(std::string("cannot create: ") + std::strerror(errno));
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  if (std::fwrite(length, 1, 8, file_.get()) != 8 ||
      std::fwrite(header.data(), 1, header.size(), file_.get()) != header.size()) {
    const std::string problem = std::string("cannot write: ") + std::strerror(errno);
    file_.reset();
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    fail(problem);
  }
}

safetensors_writer::~safetensors_writer() {
  if (finished_) return;
  file_.reset();
  std::error_code ec;
  std::filesystem::remove(path_, ec); // an unfinished file is a corrupt checkpoint
}

void safetensors_writer::fail(const std::string& problem) { troupe::fail(path_, problem); }

void safetensors_writer::write(std::span<const std::byte> bytes) {
  if (!file_) fail("write after finish");
  if (bytes.size() > num_bytes_total_ - num_bytes_written_)
    fail("writing " + std::to_string(bytes.size()) + " bytes after " + std::to_string(num_bytes_written_) +
         " runs past the " + std::to_string(num_bytes_total_) + " bytes the header declares");
  if (bytes.empty()) return; // an empty span may carry a null pointer, which fwrite must not see
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_.get()) != bytes.size())
    fail(std::string("cannot write: ") + std::strerror(errno));
  num_bytes_written_ += bytes.size();
}

void safetensors_writer::finish() {
  if (!file_) fail("finish called twice");
  if (num_bytes_written_ != num_bytes_total_)
    fail("finished after " + std::to_string(num_bytes_written_) + " of the " + std::to_string(num_bytes_total_) +
         " bytes the header declares");
  if (std::fclose(file_.release()) != 0) fail(std::string("cannot close: ") + std::strerror(errno));
  finished_ = true;
}

void write_safetensors(const std::filesystem::path& file, std::span<const tensor_to_write> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return dtype_size(tensors[a].type) > dtype_size(tensors[b].type);
  });
  std::vector<tensor_spec> specs;
  for (const auto i : order) {
    const auto& t = tensors[i];
    std::uint64_t numel = 0;
    std::uint64_t expected = 0;
    if (std::none_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d < 0; }) &&
        checked_numel(t.shape, numel) && !__builtin_mul_overflow(numel, dtype_size(t.type), &expected) &&
        t.bytes.size() != expected)
      fail(file, "tensor " + in_quotes(t.name) + " has " + std::to_string(t.bytes.size()) + " bytes, expected " +
                     std::to_string(expected) + " for " + std::string(dtype_name(t.type)) + " shape " +
                     format_shape(t.shape));
    specs.push_back({t.name, t.type, t.shape});
  }
  safetensors_writer writer(file, std::move(specs), metadata); // rejects bad shapes and names
  for (const auto i : order) writer.write(tensors[i].bytes);
  writer.finish();
}

} // namespace troupe
