#include "engine/model/model_weights.hpp"
#include "engine/model/presets.hpp"
#include "engine/make_model/random_model.hpp"
#include "engine/formats/safetensors.hpp"

#include "engine/formats/safetensors.hpp"
#include "tests/engine/model/model_test_util.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <random>

using namespace troupe;
using troupe::test::error_of;
using troupe::test::read_file;
using troupe::test::temp_dir;
using troupe::test::write_file;

namespace {

/// A tensor as the test wrote it: values already rounded to its dtype.
struct owned_tensor {
  std::string name;
  dtype type;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  std::vector<std::byte> bytes;
};

auto tiny_config(bool tied) -> model_config {
  model_config c;
  c.vocab_size = 16;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 2;
  c.tie_word_embeddings = tied;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

auto make_tensor(std::string name, dtype type, std::vector<std::int64_t> shape, std::mt19937& rng)
    -> owned_tensor {
  owned_tensor t{std::move(name), type, std::move(shape), {}, {}};
  std::int64_t n = 1;
  for (const auto d : t.shape) n *= d;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  t.bytes.resize(static_cast<std::size_t>(n) * dtype_size(type));
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    auto* dst = t.bytes.data() + static_cast<std::size_t>(i) * dtype_size(type);
    if (type == dtype::f32) {
      std::memcpy(dst, &v, 4);
    } else {
      const std::uint16_t h = type == dtype::f16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(dst, &h, 2);
    }
    t.values.push_back(load_as_f32(type, t.bytes.data(), static_cast<std::size_t>(i)));
  }
  return t;
}

/// Every tensor of c's model, with HF names; matrices and norms may differ in dtype.
auto make_tensors(const model_config& c, dtype matrices, dtype norms, bool with_lm_head) -> std::vector<owned_tensor> {
  std::mt19937 rng(1234);
  const auto h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  const auto in = c.intermediate_size;
  std::vector<owned_tensor> out;
  out.push_back(make_tensor("model.embed_tokens.weight", matrices, {c.vocab_size, h}, rng));
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    out.push_back(make_tensor(p + "input_layernorm.weight", norms, {h}, rng));
    out.push_back(make_tensor(p + "self_attn.q_proj.weight", matrices, {q, h}, rng));
    out.push_back(make_tensor(p + "self_attn.k_proj.weight", matrices, {kv, h}, rng));
    out.push_back(make_tensor(p + "self_attn.v_proj.weight", matrices, {kv, h}, rng));
    out.push_back(make_tensor(p + "self_attn.o_proj.weight", matrices, {h, q}, rng));
    out.push_back(make_tensor(p + "post_attention_layernorm.weight", norms, {h}, rng));
    out.push_back(make_tensor(p + "mlp.gate_proj.weight", matrices, {in, h}, rng));
    out.push_back(make_tensor(p + "mlp.up_proj.weight", matrices, {in, h}, rng));
    out.push_back(make_tensor(p + "mlp.down_proj.weight", matrices, {h, in}, rng));
  }
  out.push_back(make_tensor("model.norm.weight", norms, {h}, rng));
  if (with_lm_head) out.push_back(make_tensor("lm_head.weight", matrices, {c.vocab_size, h}, rng));
  return out;
}

void write_tensors(const std::filesystem::path& file, const std::vector<owned_tensor>& tensors) {
  std::vector<tensor_to_write> views;
  for (const auto& t : tensors) views.push_back({t.name, t.type, t.shape, t.bytes});
  write_safetensors(file, views);
}

void write_model(const temp_dir& dir, const model_config& c, const std::vector<owned_tensor>& tensors) {
  c.save(dir.path());
  write_tensors(dir / "model.safetensors", tensors);
}

auto shard_name(int i) -> std::string { return "model-0000" + std::to_string(i + 1) + "-of-00003.safetensors"; }

/// Deals the tensors round-robin into 3 shards and writes the index.
void write_sharded(const temp_dir& dir, const model_config& c, const std::vector<owned_tensor>& tensors) {
  c.save(dir.path());
  std::vector<owned_tensor> shards[3];
  std::string index = R"({"metadata": {"total_size": 1234}, "weight_map": {)";
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    shards[i % 3].push_back(tensors[i]);
    index += (i > 0 ? ", \"" : "\"") + tensors[i].name + "\": \"" + shard_name(static_cast<int>(i % 3)) + "\"";
  }
  write_file(dir / "model.safetensors.index.json", index + "}}");
  for (int s = 0; s < 3; ++s) write_tensors(dir / shard_name(s), shards[s]);
}

/// The loaded tensor for an HF name.
auto loaded(const model_weights& w, const std::string& name) -> const weight_tensor& {
  if (name == "model.embed_tokens.weight") return w.embed;
  if (name == "model.norm.weight") return w.final_norm;
  if (name == "lm_head.weight") return w.lm_head;
  const auto rest = name.substr(std::string("model.layers.").size());
  const auto& l = w.layers.at(std::stoul(rest));
  const std::map<std::string, const weight_tensor*> parts = {
      {"input_layernorm.weight", &l.attn_norm},  {"self_attn.q_proj.weight", &l.wq},
      {"self_attn.k_proj.weight", &l.wk},        {"self_attn.v_proj.weight", &l.wv},
      {"self_attn.o_proj.weight", &l.wo},        {"post_attention_layernorm.weight", &l.mlp_norm},
      {"mlp.gate_proj.weight", &l.w_gate},       {"mlp.up_proj.weight", &l.w_up},
      {"mlp.down_proj.weight", &l.w_down}};
  return *parts.at(rest.substr(rest.find('.') + 1));
}

/// Every element of every tensor reads back exactly; norms come back as F32.
void check_weights(const model_weights& w, const std::vector<owned_tensor>& tensors) {
  REQUIRE(w.layers.size() == static_cast<std::size_t>(w.config.num_hidden_layers));
  for (const auto& t : tensors) {
    CAPTURE(t.name);
    const auto& lt = loaded(w, t.name);
    const bool is_norm = t.shape.size() == 1;
    CHECK(lt.type == (is_norm ? dtype::f32 : t.type));
    CHECK(lt.rows == (is_norm ? 1 : t.shape[0]));
    CHECK(lt.cols == t.shape.back());
    CHECK(reinterpret_cast<std::uintptr_t>(lt.data) % dtype_size(lt.type) == 0);
    int mismatches = 0;
    for (std::size_t i = 0; i < t.values.size(); ++i)
      if (load_as_f32(lt.type, lt.data, i) != t.values[i]) ++mismatches;
    CHECK(mismatches == 0);
  }
}

auto find_tensor(std::vector<owned_tensor>& tensors, const std::string& name) -> owned_tensor& {
  for (auto& t : tensors)
    if (t.name == name) return t;
  throw std::logic_error("no tensor " + name);
}

void erase_tensor(std::vector<owned_tensor>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const owned_tensor& t) { return t.name == name; });
}

/// Replaces the first occurrence of from in file (same length keeps offsets valid).
void patch_file(const std::filesystem::path& file, const std::string& from, const std::string& to) {
  auto text = read_file(file);
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  write_file(file, text);
}

} // namespace

TEST_CASE("loads an untied F32 model from model.safetensors") {
  const temp_dir dir;
  const auto c = tiny_config(false);
  auto tensors = make_tensors(c, dtype::f32, dtype::f32, true);
  write_model(dir, c, tensors);
  const auto w = model_weights::load(dir.path());
  CHECK(w.config == c);
  check_weights(w, tensors);
  CHECK(w.lm_head.data != w.embed.data);
  CHECK(w.storage.size() == 1 + 5); // the file, and 2 norms per layer + the final norm
  const auto& embed = find_tensor(tensors, "model.embed_tokens.weight");
  CHECK(load_as_f32(dtype::f32, w.embed.row(3), 1) == embed.values[3 * 8 + 1]);
}

TEST_CASE("F16 and BF16 weights stay in place; norms are widened to F32") {
  for (const auto& [matrices, norms] : {std::pair{dtype::f16, dtype::bf16}, std::pair{dtype::bf16, dtype::f16},
                                       std::pair{dtype::bf16, dtype::f32}}) {
    CAPTURE(dtype_name(matrices));
    const temp_dir dir;
    auto c = tiny_config(false);
    c.architecture = "MistralForCausalLM";
    auto tensors = make_tensors(c, matrices, norms, true);
    // Mixed dtypes are allowed: one matrix in F32.
    find_tensor(tensors, "model.layers.1.self_attn.v_proj.weight") = [&] {
      std::mt19937 rng(5);
      return make_tensor("model.layers.1.self_attn.v_proj.weight", dtype::f32, {4, 8}, rng);
    }();
    write_model(dir, c, tensors);
    const auto w = model_weights::load(dir.path());
    CHECK(w.config.architecture == "MistralForCausalLM");
    CHECK(w.layers[0].wq.type == matrices);
    CHECK(w.layers[1].wv.type == dtype::f32);
    check_weights(w, tensors);
  }
}

TEST_CASE("tied embeddings: lm_head is the embedding, whether or not lm_head.weight is stored") {
  for (const bool stored : {false, true}) {
    CAPTURE(stored);
    const temp_dir dir;
    const auto c = tiny_config(true);
    auto tensors = make_tensors(c, dtype::bf16, dtype::bf16, stored);
    write_model(dir, c, tensors);
    const auto w = model_weights::load(dir.path());
    CHECK(w.lm_head.data == w.embed.data);
    CHECK(w.lm_head.rows == 16);
    CHECK(w.lm_head.cols == 8);
    CHECK(w.lm_head.type == dtype::bf16);
    erase_tensor(tensors, "lm_head.weight");
    check_weights(w, tensors);
  }
}

TEST_CASE("loads a model sharded over 3 files through model.safetensors.index.json") {
  const temp_dir dir;
  const auto c = tiny_config(false);
  const auto tensors = make_tensors(c, dtype::f16, dtype::f32, true);
  write_sharded(dir, c, tensors);
  const auto w = model_weights::load(dir.path());
  check_weights(w, tensors);
  CHECK(w.storage.size() == 3 + 5); // each shard once, and the 5 norms

  const auto index = (dir / "model.safetensors.index.json").string() + ": ";
  SUBCASE("a shard the index names is missing") {
    std::filesystem::remove(dir / shard_name(1));
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          (dir / shard_name(1)).string() + ": file not found");
  }
  SUBCASE("the index lacks a tensor") {
    patch_file(dir / "model.safetensors.index.json", "\"model.norm.weight\"", "\"model.norm.weighs\"");
    CHECK(error_of([&] { model_weights::load(dir.path()); }) == index + "missing tensor 'model.norm.weight'");
  }
  SUBCASE("the shard lacks a tensor the index puts there") {
    std::vector<owned_tensor> first;
    for (std::size_t i = 0; i < tensors.size(); i += 3) first.push_back(tensors[i]);
    erase_tensor(first, "model.embed_tokens.weight");
    write_tensors(dir / shard_name(0), first);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          (dir / shard_name(0)).string() + ": missing tensor 'model.embed_tokens.weight'");
  }
  SUBCASE("the index has no weight_map") {
    write_file(dir / "model.safetensors.index.json", R"({"metadata": {}})");
    CHECK(error_of([&] { model_weights::load(dir.path()); }) == index + "has no weight_map object");
  }
  SUBCASE("the index is not JSON") {
    write_file(dir / "model.safetensors.index.json", R"({"weight_map": )");
    CHECK(error_of([&] { model_weights::load(dir.path()); }) == index + "not valid JSON");
  }
  SUBCASE("a weight_map entry is not a file name") {
    patch_file(dir / "model.safetensors.index.json", "\"" + shard_name(2) + "\"", "7");
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          index + "weight_map entry 'model.layers.0.self_attn.q_proj.weight' is not a relative file name");
  }
}

TEST_CASE("model directory errors name the file and the problem") {
  const temp_dir dir;
  const auto file = (dir / "model.safetensors").string() + ": ";
  auto c = tiny_config(false);
  auto tensors = make_tensors(c, dtype::bf16, dtype::f32, true);

  SUBCASE("no config.json") {
    write_tensors(dir / "model.safetensors", tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) == (dir / "config.json").string() + ": file not found");
  }
  SUBCASE("no weights") {
    c.save(dir.path());
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          dir.path().string() + ": no model.safetensors or model.safetensors.index.json");
  }
  SUBCASE("missing tensor") {
    erase_tensor(tensors, "model.layers.1.mlp.up_proj.weight");
    write_model(dir, c, tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          file + "missing tensor 'model.layers.1.mlp.up_proj.weight'");
  }
  SUBCASE("untied model without lm_head.weight") {
    erase_tensor(tensors, "lm_head.weight");
    write_model(dir, c, tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) == file + "missing tensor 'lm_head.weight'");
  }
  SUBCASE("wrong matrix shape") {
    std::mt19937 rng(9);
    find_tensor(tensors, "model.layers.1.self_attn.k_proj.weight") =
        make_tensor("model.layers.1.self_attn.k_proj.weight", dtype::bf16, {8, 8}, rng);
    write_model(dir, c, tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          file + "tensor 'model.layers.1.self_attn.k_proj.weight' has shape [8, 8], expected [4, 8]");
  }
  SUBCASE("transposed matrix") {
    std::mt19937 rng(9);
    find_tensor(tensors, "model.layers.0.mlp.down_proj.weight") =
        make_tensor("model.layers.0.mlp.down_proj.weight", dtype::bf16, {12, 8}, rng);
    write_model(dir, c, tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          file + "tensor 'model.layers.0.mlp.down_proj.weight' has shape [12, 8], expected [8, 12]");
  }
  SUBCASE("norm stored as a matrix") {
    std::mt19937 rng(9);
    find_tensor(tensors, "model.norm.weight") = make_tensor("model.norm.weight", dtype::f32, {1, 8}, rng);
    write_model(dir, c, tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          file + "tensor 'model.norm.weight' has shape [1, 8], expected [8]");
  }
  SUBCASE("unsupported dtype") {
    write_model(dir, c, tensors);
    // "I16 " has BF16's length and element size: only the dtype is wrong.
    patch_file(dir / "model.safetensors", R"("model.layers.0.mlp.gate_proj.weight":{"dtype":"BF16")",
               R"("model.layers.0.mlp.gate_proj.weight":{"dtype":"I16" )");
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          file + "tensor 'model.layers.0.mlp.gate_proj.weight' has unsupported dtype I16");
  }
  SUBCASE("unsupported architecture") {
    write_model(dir, c, tensors);
    patch_file(dir / "config.json", "LlamaForCausalLM", "GPT2LMHeadModel");
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          (dir / "config.json").string() +
              ": unsupported architecture 'GPT2LMHeadModel' (supported: " + model_config::supported_architectures() + ")");
  }
  SUBCASE("a tensor the architecture does not use") {
    // Qwen2.5 relabelled as Llama: its q/k/v biases would be ignored.
    std::mt19937 rng(9);
    tensors.push_back(make_tensor("model.layers.0.self_attn.q_proj.bias", dtype::bf16, {8}, rng));
    write_model(dir, c, tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          file + "tensor 'model.layers.0.self_attn.q_proj.bias' is not used by LlamaForCausalLM as troupe implements "
                 "it (loading would ignore it)");
  }
  SUBCASE("rotary caches are derived data, not weights") {
    std::mt19937 rng(9);
    tensors.push_back(make_tensor("model.layers.0.self_attn.rotary_emb.inv_freq", dtype::f32, {2}, rng));
    write_model(dir, c, tensors);
    CHECK(error_of([&] { model_weights::load(dir.path()); }).empty());
  }
  SUBCASE("only a PyTorch pickle") {
    c.save(dir.path());
    write_file(dir / "pytorch_model.bin", "not read");
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          (dir / "pytorch_model.bin").string() +
              ": PyTorch pickle checkpoints are not read; convert the model to safetensors");
  }
  SUBCASE("truncated safetensors file") {
    write_model(dir, c, tensors);
    std::filesystem::resize_file(dir / "model.safetensors", 4);
    CHECK(error_of([&] { model_weights::load(dir.path()); }) ==
          file + "file is 4 bytes, too short for the 8-byte header length");
  }
  SUBCASE("data cut short") {
    write_model(dir, c, tensors);
    std::filesystem::resize_file(dir / "model.safetensors", std::filesystem::file_size(dir / "model.safetensors") - 2);
    const auto error = error_of([&] { model_weights::load(dir.path()); });
    CHECK(error.find(file + "tensor 'lm_head.weight' has data_offsets [") == 0);
  }
}

TEST_CASE("Phi-3's fused qkv_proj and gate_up_proj are row views into the checkpoint, not copies") {
  const temp_dir dir;
  const auto c = family_config("Phi3ForCausalLM", 50, 32, 48, 1, 4, 2, 8);
  write_random_model(dir.path(), c, {3, dtype::bf16, 1.0, {}});
  const auto w = model_weights::load(dir.path());
  const auto& l = w.layers[0];
  const auto at = [](const weight_tensor& t) { return static_cast<const std::byte*>(t.data); };
  const std::ptrdiff_t row = 32 * 2; // one BF16 row of hidden 32
  CHECK(l.wq.rows == 32);
  CHECK(l.wk.rows == 16);
  CHECK(l.wv.rows == 16);
  CHECK(at(l.wk) == at(l.wq) + 32 * row);
  CHECK(at(l.wv) == at(l.wk) + 16 * row);
  CHECK(l.w_gate.rows == 48);
  CHECK(at(l.w_up) == at(l.w_gate) + 48 * row);
}

TEST_CASE("each family's tensors load under their HF names; Gemma's norms hold 1 + w") {
  for (const auto* arch : {"Qwen2ForCausalLM", "Qwen3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM"}) {
    CAPTURE(arch);
    const temp_dir dir;
    const auto c = family_config(arch, 40, 16, 24, 2, 2, 1, 8);
    write_random_model(dir.path(), c, {5, dtype::f32, 1.0, {}});
    const auto w = model_weights::load(dir.path());
    const auto& l = w.layers[1];
    const auto f = c.family();
    CHECK((l.bq.data != nullptr) == (f == model_family::qwen2));
    CHECK((l.q_norm.data != nullptr) == (f == model_family::qwen3 || f == model_family::gemma3));
    CHECK((l.post_mlp_norm.data != nullptr) == (f == model_family::gemma2 || f == model_family::gemma3));
    if (f == model_family::gemma2 || f == model_family::gemma3) {
      const auto file = safetensors_file::open(dir / "model.safetensors");
      const auto* raw = file->find("model.layers.1.pre_feedforward_layernorm.weight");
      REQUIRE(raw != nullptr);
      CHECK(static_cast<const float*>(l.mlp_norm.data)[3] == 1.0f + load_as_f32(raw->type, raw->data, 3));
      CHECK(w.lm_head.data == w.embed.data); // Gemma ties by default
    }
  }
}
