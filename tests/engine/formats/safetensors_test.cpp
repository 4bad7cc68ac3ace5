#include "engine/formats/safetensors.hpp"

#include "tests/engine/model/model_test_util.hpp"

#include <doctest/doctest.h>

#include <cstring>

using namespace troupe;
using troupe::test::bytes_of;
using troupe::test::error_of;
using troupe::test::raw_safetensors;
using troupe::test::temp_dir;
using troupe::test::write_file;

namespace {

auto as_vector(const tensor_info& t) -> std::vector<std::byte> { return {t.data, t.data + t.num_bytes}; }

auto to_bytes(std::span<const std::byte> s) -> std::vector<std::byte> { return {s.begin(), s.end()}; }

auto aligned(const tensor_info& t) -> bool {
  return reinterpret_cast<std::uintptr_t>(t.data) % dtype_size(t.type) == 0;
}

/// The error message from opening a file made of these bytes.
auto open_error(const temp_dir& dir, const std::string& bytes) -> std::string {
  const auto file = dir / "bad.safetensors";
  write_file(file, bytes);
  return error_of([&] { safetensors_file::open(file); });
}

} // namespace

TEST_CASE("write_safetensors and safetensors_file round-trip F32, F16 and BF16 with metadata") {
  const temp_dir dir;
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-7f, -1e7f};
  const std::vector<std::uint16_t> f16 = {f32_to_f16(0.5f), f32_to_f16(-1.0f), f32_to_f16(65504.0f)};
  const std::vector<std::uint16_t> bf16 = {f32_to_bf16(3.0f), f32_to_bf16(-0.125f), f32_to_bf16(1e30f),
                                           f32_to_bf16(7.0f)};
  const std::vector<float> scalar = {42.0f};
  // F16 first: write_safetensors must still put the F32 tensors first in the data.
  const std::vector<tensor_to_write> tensors = {
      {"half", dtype::f16, {3}, bytes_of(f16)},
      {"weight", dtype::f32, {2, 3}, bytes_of(f32)},
      {"brain", dtype::bf16, {2, 1, 2}, bytes_of(bf16)},
      {"scalar", dtype::f32, {}, bytes_of(scalar)},
      {"empty", dtype::f32, {0, 4}, {}},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "a \"quoted\"\nline\\"}};
  const auto file = dir / "model.safetensors";
  write_safetensors(file, tensors, metadata);

  const auto bytes = troupe::test::read_file(file);
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  CHECK(header_length % 8 == 0);
  CHECK(bytes.size() == 8 + header_length + 24 + 4 + 6 + 8);
  // JSON, then fewer than 8 spaces of padding.
  const auto header = bytes.substr(8, header_length);
  const auto json_end = header.find_last_not_of(' ') + 1;
  CHECK(header[json_end - 1] == '}');
  CHECK(header_length - json_end < 8);

  const auto st = safetensors_file::open(file);
  CHECK(st->path() == file);
  CHECK(st->metadata() == metadata);
  REQUIRE(st->tensors().size() == 5);
  CHECK(st->tensors()[0].name == "weight"); // widest first, else in the given order
  CHECK(st->tensors()[1].name == "scalar");
  CHECK(st->tensors()[2].name == "empty");
  CHECK(st->tensors()[3].name == "half");
  CHECK(st->tensors()[4].name == "brain");
  for (const auto& t : tensors) {
    const auto* info = st->find(t.name);
    REQUIRE(info != nullptr);
    CHECK(info->name == t.name);
    CHECK(info->type == t.type);
    CHECK(info->shape == t.shape);
    CHECK(info->num_bytes == t.bytes.size());
    CHECK(info->numel() * static_cast<std::int64_t>(dtype_size(info->type)) ==
          static_cast<std::int64_t>(info->num_bytes));
    CHECK(as_vector(*info) == to_bytes(t.bytes));
    CHECK(aligned(*info));
  }
  CHECK(load_as_f32(dtype::f32, st->find("weight")->data, 5) == -1e7f);
  CHECK(load_as_f32(dtype::f16, st->find("half")->data, 2) == 65504.0f);
  CHECK(load_as_f32(dtype::bf16, st->find("brain")->data, 1) == -0.125f);
  CHECK(st->find("missing") == nullptr);
  CHECK(st->find("weigh") == nullptr);
}

TEST_CASE("a file without metadata has an empty metadata map") {
  const temp_dir dir;
  const std::vector<float> v = {1, 2};
  const tensor_to_write t{"v", dtype::f32, {2}, bytes_of(v)};
  write_safetensors(dir / "a.safetensors", std::span(&t, 1));
  const auto st = safetensors_file::open(dir / "a.safetensors");
  CHECK(st->metadata().empty());
  CHECK(troupe::test::read_file(dir / "a.safetensors").find("__metadata__") == std::string::npos);
}

TEST_CASE("safetensors_writer streams in chunks across tensor boundaries") {
  const temp_dir dir;
  const auto file = dir / "stream.safetensors";
  // F16 with an odd count first: the F32 tensor after it is misaligned in the
  // file, so the reader must hand out an aligned copy.
  const std::vector<std::uint16_t> a = {f32_to_f16(1.0f), f32_to_f16(2.0f), f32_to_f16(3.0f)};
  const std::vector<float> b = {0.5f, -0.5f, 8.0f, 9.0f};
  std::vector<std::byte> all = to_bytes(bytes_of(a));
  const auto b_bytes = bytes_of(b);
  all.insert(all.end(), b_bytes.begin(), b_bytes.end());
  {
    safetensors_writer w(file, {{"a", dtype::f16, {3}}, {"b", dtype::f32, {2, 2}}}, {{"k", "v"}});
    CHECK(w.num_bytes_total() == 22);
    std::size_t pos = 0;
    for (const std::size_t chunk : {1, 7, 0, 9, 5}) {
      w.write(std::span(all).subspan(pos, chunk));
      pos += chunk;
    }
    CHECK(w.num_bytes_written() == 22);
    w.finish();
  }
  const auto st = safetensors_file::open(file);
  CHECK(st->metadata() == std::map<std::string, std::string>{{"k", "v"}});
  REQUIRE(st->tensors().size() == 2);
  const auto* tb = st->find("b");
  REQUIRE(tb != nullptr);
  CHECK(aligned(*tb));
  CHECK(as_vector(*tb) == to_bytes(b_bytes));
  CHECK(load_as_f32(dtype::f32, tb->data, 3) == 9.0f);
  CHECK(load_as_f32(dtype::f16, st->find("a")->data, 2) == 3.0f);
}

TEST_CASE("safetensors_writer refuses bad specs, overruns and short files") {
  const temp_dir dir;
  const auto file = dir / "w.safetensors";
  const auto name = file.string();
  CHECK(error_of([&] { safetensors_writer(file, {{"x", dtype::f32, {1}}, {"x", dtype::f16, {1}}}); }) ==
        name + ": tensor 'x' appears twice");
  CHECK(error_of([&] { safetensors_writer(file, {{"__metadata__", dtype::f32, {1}}}); }) ==
        name + ": tensor name '__metadata__' is reserved");
  CHECK(error_of([&] { safetensors_writer(file, {{"x", dtype::f32, {2, -1}}}); }) ==
        name + ": tensor 'x' has negative dimensions in shape [2, -1]");
  CHECK_FALSE(std::filesystem::exists(file));

  const std::vector<std::byte> five(5);
  SUBCASE("overrun") {
    safetensors_writer w(file, {{"x", dtype::f16, {2}}});
    w.write(std::span(five).first(3));
    CHECK(error_of([&] { w.write(std::span(five).first(2)); }) ==
          name + ": writing 2 bytes after 3 runs past the 4 bytes the header declares");
  }
  SUBCASE("short, and the partial file is removed") {
    {
      safetensors_writer w(file, {{"x", dtype::f16, {2}}});
      w.write(std::span(five).first(3));
      CHECK(error_of([&] { w.finish(); }) == name + ": finished after 3 of the 4 bytes the header declares");
      CHECK(std::filesystem::exists(file));
    }
    CHECK_FALSE(std::filesystem::exists(file));
  }
  SUBCASE("write_safetensors checks each tensor's byte count") {
    const tensor_to_write t{"t", dtype::bf16, {2, 2}, std::span(five)};
    CHECK(error_of([&] { write_safetensors(file, std::span(&t, 1)); }) ==
          name + ": tensor 't' has 5 bytes, expected 8 for BF16 shape [2, 2]");
  }
  SUBCASE("cannot create") {
    CHECK(error_of([&] { safetensors_writer(dir / "no" / "such.safetensors", {}); }) ==
          (dir / "no" / "such.safetensors").string() + ": cannot create: No such file or directory");
  }
}

TEST_CASE("corrupt safetensors files name the file and the problem") {
  const temp_dir dir;
  const auto p = (dir / "bad.safetensors").string() + ": ";
  const std::string data16(16, '\x01');
  const auto entry = [](const std::string& body) { return "{\"x\": {" + body + "}}"; };

  CHECK(error_of([&] { safetensors_file::open(dir / "none.safetensors"); }) ==
        (dir / "none.safetensors").string() + ": cannot open: No such file or directory");
  CHECK(error_of([&] { safetensors_file::open(dir.path()); }) == dir.path().string() + ": not a regular file");
  CHECK(open_error(dir, "") == p + "file is 0 bytes, too short for the 8-byte header length");
  CHECK(open_error(dir, std::string("\x05\0\0\0\0", 5)) ==
        p + "file is 5 bytes, too short for the 8-byte header length");
  CHECK(open_error(dir, raw_safetensors("{}", "", 1000)) == p + "header length 1000 exceeds file size 10");
  CHECK(open_error(dir, raw_safetensors("{}", "", UINT64_MAX - 1)) ==
        p + "header length 18446744073709551614 exceeds file size 10");
  CHECK(open_error(dir, raw_safetensors("")) == p + "header is not valid JSON");
  CHECK(open_error(dir, raw_safetensors("        ")) == p + "header is not valid JSON");
  CHECK(open_error(dir, raw_safetensors("{\"x\": {")) == p + "header is not valid JSON");
  CHECK(open_error(dir, raw_safetensors("{} {}")) == p + "header is not valid JSON");
  CHECK(open_error(dir, raw_safetensors("[1, 2]")) == p + "header is not a JSON object");
  CHECK(open_error(dir, raw_safetensors("{\"__metadata__\": {\"a\": 1}}")) ==
        p + "__metadata__ is not an object of strings");
  CHECK(open_error(dir, raw_safetensors("{\"__metadata__\": [\"a\"]}")) ==
        p + "__metadata__ is not an object of strings");
  CHECK(open_error(dir, raw_safetensors("{\"x\": 3}")) == p + "tensor 'x' is not an object");

  const std::string shape = "\"shape\": [2, 2], ";
  const std::string offsets = "\"data_offsets\": [0, 16]";
  CHECK(open_error(dir, raw_safetensors(entry(shape + offsets), data16)) == p + "tensor 'x' has no dtype");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", " + offsets), data16)) ==
        p + "tensor 'x' has no shape");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", \"shape\": [2, 2]"), data16)) ==
        p + "tensor 'x' has no data_offsets");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": 7, " + shape + offsets), data16)) ==
        p + "tensor 'x' has a dtype that is not a string");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"I8\", " + shape + offsets), data16)) ==
        p + "tensor 'x' has unsupported dtype I8");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F64\", " + shape + offsets), data16)) ==
        p + "tensor 'x' has unsupported dtype F64");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", \"shape\": [2, -2], " + offsets), data16)) ==
        p + "tensor 'x' has a shape that is not an array of non-negative integers");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", \"shape\": [2.0, 2], " + offsets), data16)) ==
        p + "tensor 'x' has a shape that is not an array of non-negative integers");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", \"shape\": 4, " + offsets), data16)) ==
        p + "tensor 'x' has a shape that is not an array of non-negative integers");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", " + shape + "\"data_offsets\": [0, 8, 16]"),
                                        data16)) == p + "tensor 'x' has data_offsets that are not [begin, end]");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", " + shape + "\"data_offsets\": [-1, 15]"),
                                        data16)) == p + "tensor 'x' has data_offsets that are not [begin, end]");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", " + shape + "\"data_offsets\": [16]"), data16)) ==
        p + "tensor 'x' has data_offsets that are not [begin, end]");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", " + shape + "\"data_offsets\": [16, 0]"),
                                        data16)) == p + "tensor 'x' has reversed data_offsets [16, 0]");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", " + shape + "\"data_offsets\": [0, 400]"),
                                        data16)) ==
        p + "tensor 'x' has data_offsets [0, 400] beyond the 16 bytes of data");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", " + shape + "\"data_offsets\": [0, 12]"),
                                        data16)) == p + "tensor 'x' has 12 bytes, expected 16 for F32 shape [2, 2]");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"BF16\", " + shape + offsets), data16)) ==
        p + "tensor 'x' has 16 bytes, expected 8 for BF16 shape [2, 2]");
  CHECK(open_error(dir, raw_safetensors(entry("\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], " + offsets),
                                        data16)) ==
        p + "tensor 'x' has shape [4294967296, 4294967296] too large to address");

  const std::string a = "\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}";
  const std::string b = "\"b\": {\"dtype\": \"F16\", \"shape\": [4], \"data_offsets\": [8, 16]}";
  const std::string c = "\"c\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [12, 16]}";
  const std::string e = "\"e\": {\"dtype\": \"F16\", \"shape\": [0], \"data_offsets\": [4, 4]}";
  CHECK(open_error(dir, raw_safetensors("{" + a + ", " + b + "}", data16)) == p + "tensors 'a' and 'b' overlap");
  CHECK(open_error(dir, raw_safetensors("{" + c + ", " + b + "}", data16)) == p + "tensors 'b' and 'c' overlap");
  CHECK(open_error(dir, raw_safetensors("{" + a + ", " + a + "}", data16)) == p + "tensor 'a' appears twice");
  // Empty tensors overlap nothing; [0, 8) and [8, 16) only touch.
  CHECK(open_error(dir, raw_safetensors("{" + a + ", " + e + "}", data16)).empty());
  const std::string b0 = "\"b0\": {\"dtype\": \"F16\", \"shape\": [4], \"data_offsets\": [0, 8]}";
  CHECK(open_error(dir, raw_safetensors("{" + b0 + ", " + b + "}", data16)).empty());
}

TEST_CASE("a hand-built file with an unpadded header and trailing spaces reads") {
  const temp_dir dir;
  const auto file = dir / "odd.safetensors";
  // Header length 61 puts the data at offset 69: F32 data misaligned in the mapping.
  const float v[2] = {1.25f, -3.0f};
  std::string data(reinterpret_cast<const char*>(v), sizeof v);
  const std::string header = "{\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}       ";
  REQUIRE(header.size() == 61);
  write_file(file, raw_safetensors(header, data));
  const auto st = safetensors_file::open(file);
  const auto* t = st->find("v");
  REQUIRE(t != nullptr);
  CHECK(aligned(*t));
  CHECK(reinterpret_cast<const float*>(t->data)[1] == -3.0f);
  CHECK(format_shape(t->shape) == "[2]");
  CHECK(format_shape(std::vector<std::int64_t>{}) == "[]");
}
