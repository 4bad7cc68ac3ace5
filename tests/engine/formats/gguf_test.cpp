#include "engine/formats/gguf.hpp"

#include "tests/engine/model/model_test_util.hpp"
#include "tests/support/gguf_writer.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <numeric>

using namespace troupe;
using troupe::test::error_of;
using troupe::test::temp_dir;
using troupe::test::write_file;
using troupe::testing::gguf_writer;

namespace {

auto open_bytes(const temp_dir& dir, const std::string& bytes) -> std::shared_ptr<const gguf::file> {
  const auto path = dir / "m.gguf";
  write_file(path, bytes);
  return gguf::file::open(path);
}

auto open_error(const temp_dir& dir, const std::string& bytes) -> std::string {
  return error_of([&] { open_bytes(dir, bytes); });
}

auto floats(std::size_t n, float start) -> std::vector<float> {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

/// A header by hand: magic, version, counts.
auto header(std::uint32_t version, std::uint64_t tensors, std::uint64_t keys) -> std::string {
  std::string out = "GGUF";
  gguf_writer::u32(out, version);
  gguf_writer::u64(out, tensors);
  gguf_writer::u64(out, keys);
  return out;
}

} // namespace

TEST_CASE("a GGUF file's metadata and tensors, as written") {
  temp_dir dir;
  gguf_writer w;
  w.kv_string("general.architecture", "llama");
  w.kv_u32("llama.block_count", 2);
  w.kv_i32("llama.signed", -7);
  w.kv_u64("llama.context_length", 4096);
  w.kv_f32("llama.rope.freq_base", 500000.0f);
  w.kv_bool("tokenizer.ggml.add_bos_token", true);
  w.kv_strings("tokenizer.ggml.tokens", {"<s>", "</s>", "a", "\xe2\x96\x81" "b", ""});
  w.kv_f32s("tokenizer.ggml.scores", {0.0f, -1.5f, 2.0f, 3.0f, 4.0f});
  w.kv_i32s("tokenizer.ggml.token_type", {3, 3, 1, 1, 1});
  const auto a = floats(6, 1.0f);
  const auto b = floats(64, -3.0f);
  w.tensor<float>("a", {3, 2}, 0, a);
  w.tensor<float>("b.weight", {64}, 0, b);
  std::string q8(2 * 34, '\0'); // two Q8_0 blocks: a row of 64
  q8[0] = 1;
  w.tensor("q", {64, 1}, 8, q8);

  for (const std::uint32_t alignment : {32u, 64u, 1u << 12}) {
    CAPTURE(alignment);
    const auto path = dir / "m.gguf";
    w.write(path, alignment);
    const auto f = gguf::file::open(path);
    CHECK(f->version() == 3);
    CHECK(f->alignment() == alignment);
    CHECK(f->require_string("general.architecture") == "llama");
    CHECK(f->require_uint("llama.block_count") == 2);
    CHECK(f->find("llama.signed")->as_int() == -7);
    CHECK_FALSE(f->find("llama.signed")->as_uint());
    CHECK(f->require_uint("llama.context_length") == 4096);
    CHECK(f->require_double("llama.rope.freq_base") == 500000.0);
    CHECK(f->find("tokenizer.ggml.add_bos_token")->as_bool() == true);
    const auto& tokens = f->require_array("tokenizer.ggml.tokens");
    REQUIRE(tokens.items.size() == 5);
    CHECK(tokens.type == gguf::value_type::string);
    CHECK(tokens.items[3].as_string() == "\xe2\x96\x81" "b");
    CHECK(tokens.items[4].as_string() == "");
    CHECK(f->require_array("tokenizer.ggml.scores").items[1].as_double() == -1.5);
    CHECK(f->require_array("tokenizer.ggml.token_type").items[0].as_int() == 3);
    CHECK(gguf::describe(*f->find("tokenizer.ggml.scores")) == "array of f32");

    REQUIRE(f->tensors().size() == 3);
    const auto* ta = f->find_tensor("a");
    REQUIRE(ta != nullptr);
    CHECK(ta->ne == std::vector<std::int64_t>{3, 2});
    CHECK(ta->numel() == 6);
    CHECK(ta->num_bytes == 24);
    CHECK(reinterpret_cast<std::uintptr_t>(ta->data) % alignment == 0);
    CHECK(std::memcmp(ta->data, a.data(), 24) == 0);
    const auto* tb = f->find_tensor("b.weight");
    REQUIRE(tb != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(tb->data) % alignment == 0);
    CHECK(std::memcmp(tb->data, b.data(), 256) == 0);
    const auto* tq = f->find_tensor("q");
    REQUIRE(tq != nullptr);
    CHECK(tq->type == gguf::tensor_type::q8_0);
    CHECK(tq->num_bytes == 68);
    CHECK(static_cast<char>(tq->data[0]) == 1);
    CHECK(f->find_tensor("c") == nullptr);
  }
}

TEST_CASE("the block sizes of the quantized types") {
  CHECK(gguf::traits(8)->block_bytes == 34);   // Q8_0
  CHECK(gguf::traits(2)->block_bytes == 18);   // Q4_0
  CHECK(gguf::traits(12)->block_bytes == 144); // Q4_K
  CHECK(gguf::traits(13)->block_bytes == 176); // Q5_K
  CHECK(gguf::traits(14)->block_bytes == 210); // Q6_K
  CHECK(gguf::traits(12)->block_elements == 256);
  CHECK(gguf::traits(30)->name == "BF16");
  CHECK_FALSE(gguf::traits(4)); // removed from ggml
  CHECK_FALSE(gguf::traits(1000));
}

TEST_CASE("a broken GGUF file is refused with one line naming the problem") {
  temp_dir dir;
  const auto good = [] {
    gguf_writer w;
    w.kv_string("general.architecture", "llama");
    const auto v = floats(8, 0.0f);
    w.tensor<float>("t", {8}, 0, v);
    return w.bytes();
  }();
  REQUIRE(open_error(dir, good).empty());

  CHECK(open_error(dir, "").find("truncated: 0 bytes") != std::string::npos);
  CHECK(open_error(dir, "GGML" + good.substr(4)).find("not a GGUF file") != std::string::npos);
  CHECK(open_error(dir, header(1, 0, 0)).find("GGUF version 1 is not supported") != std::string::npos);
  CHECK(open_error(dir, header(4, 0, 0)).find("GGUF version 4") != std::string::npos);
  // Cut anywhere, the file is refused (never read past its end).
  for (std::size_t n = 24; n < good.size(); n += 7) {
    CAPTURE(n);
    CHECK(open_error(dir, good.substr(0, n)).find("truncated") != std::string::npos);
  }
  // Counts no file could hold.
  CHECK(open_error(dir, header(3, 0, std::uint64_t{1} << 60)).find("metadata entries cannot fit") != std::string::npos);
  CHECK(open_error(dir, header(3, std::uint64_t{1} << 60, 0)).find("tensors cannot fit") != std::string::npos);
  {
    auto b = header(3, 0, 1);
    gguf_writer::str(b, "k");
    gguf_writer::u32(b, 99);
    b += std::string(16, '\0');
    CHECK(open_error(dir, b).find("metadata k: unknown value type 99") != std::string::npos);
  }
  {
    auto b = header(3, 0, 1);
    gguf_writer::str(b, "k");
    gguf_writer::u32(b, gguf_writer::t_string);
    gguf_writer::u64(b, 1000);
    b += "short";
    CHECK(open_error(dir, b).find("metadata k claims 1000 bytes") != std::string::npos);
  }
  {
    auto b = header(3, 0, 1);
    gguf_writer::str(b, "arr");
    gguf_writer::u32(b, gguf_writer::t_array);
    gguf_writer::u32(b, gguf_writer::t_u32);
    gguf_writer::u64(b, std::uint64_t{1} << 40);
    b += std::string(16, '\0');
    CHECK(open_error(dir, b).find("claims 1099511627776 elements") != std::string::npos);
  }
  {
    gguf_writer w;
    w.kv_u32("k", 1);
    w.kv_u32("k", 2);
    CHECK(open_error(dir, w.bytes()).find("metadata key k appears twice") != std::string::npos);
  }
  {
    gguf_writer w;
    w.kv_raw("b", gguf_writer::t_bool, std::string(1, '\x02'));
    CHECK(open_error(dir, w.bytes()).find("metadata b is a bool of value 2") != std::string::npos);
  }
  {
    gguf_writer w;
    w.kv_u32("general.alignment", 24);
    CHECK(open_error(dir, w.bytes()).find("general.alignment must be a power of two") != std::string::npos);
  }
  const auto one_tensor = [&](std::vector<std::uint64_t> ne, std::uint32_t type, std::string bytes) {
    gguf_writer w;
    w.tensor("w", std::move(ne), type, std::move(bytes));
    return open_error(dir, w.bytes());
  };
  CHECK(one_tensor({}, 0, "").find("tensor w has 0 dimensions") != std::string::npos);
  CHECK(one_tensor({1, 1, 1, 1, 1}, 0, std::string(4, '\0')).find("tensor w has 5 dimensions") != std::string::npos);
  CHECK(one_tensor({0}, 0, "").find("impossible dimension 0") != std::string::npos);
  CHECK(one_tensor({std::uint64_t{1} << 41}, 0, "").find("impossible dimension") != std::string::npos);
  CHECK(one_tensor({8}, 77, std::string(32, '\0')).find("tensor w has an unknown type 77") != std::string::npos);
  CHECK(one_tensor({256}, 16, std::string(66, '\0')).find("tensor w has type IQ2_XXS, which troupe does not read") !=
        std::string::npos);
  CHECK(one_tensor({48}, 8, std::string(34 * 2, '\0')).find("rows of 48 values, not whole blocks of 32") !=
        std::string::npos);
  // Data past the end: the tensor declares more than the file holds.
  {
    gguf_writer w;
    w.tensor("w", {64}, 0, std::string(64, '\0')); // 64 floats need 256 bytes
    CHECK(open_error(dir, w.bytes()).find("tensor w (256 bytes at offset 0) runs past the end") != std::string::npos);
  }
  {
    gguf_writer w;
    const auto v = floats(8, 0.0f);
    w.tensor<float>("w", {8}, 0, v);
    w.tensor<float>("w", {8}, 0, v);
    CHECK(open_error(dir, w.bytes()).find("tensor w appears twice") != std::string::npos);
  }
  // A misaligned offset and overlapping tensors, by hand.
  {
    auto b = header(3, 2, 0);
    for (const auto& [name, offset] : {std::pair<std::string, std::uint64_t>{"x", 0}, {"y", 16}}) {
      gguf_writer::str(b, name);
      gguf_writer::u32(b, 1);
      gguf_writer::u64(b, 8);
      gguf_writer::u32(b, 0);
      gguf_writer::u64(b, offset);
    }
    b.resize((b.size() + 31) / 32 * 32, '\0');
    b += std::string(64, '\0');
    CHECK(open_error(dir, b).find("tensor y starts at offset 16, not a multiple of the alignment 32") !=
          std::string::npos);
  }
  {
    auto b = header(3, 2, 0);
    for (const auto& name : {"x", "y"}) {
      gguf_writer::str(b, name);
      gguf_writer::u32(b, 1);
      gguf_writer::u64(b, 16);
      gguf_writer::u32(b, 0);
      gguf_writer::u64(b, 32); // both at 32, 64 bytes each
    }
    b.resize((b.size() + 31) / 32 * 32, '\0');
    b += std::string(128, '\0');
    CHECK(open_error(dir, b).find("overlaps the tensor before it") != std::string::npos);
  }
  // Required keys: missing, or of another type.
  {
    gguf_writer w;
    w.kv_string("general.architecture", "llama");
    const auto f = open_bytes(dir, w.bytes());
    CHECK(error_of([&] { f->require_uint("llama.block_count"); }).find("the metadata has no llama.block_count") !=
          std::string::npos);
    CHECK(error_of([&] { f->require_uint("general.architecture"); })
              .find("metadata general.architecture is string, not a non-negative integer") != std::string::npos);
    CHECK(error_of([&] { f->require_array("general.architecture"); }).find("not an array") != std::string::npos);
  }
  CHECK(error_of([&] { gguf::file::open(dir / "missing.gguf"); }).find("cannot open") != std::string::npos);
}
