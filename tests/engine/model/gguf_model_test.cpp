#include "engine/model/gguf_model.hpp"

#include "engine/cpu/linear.hpp"
#include "engine/formats/gguf_quant.hpp"
#include "tests/engine/model/model_test_util.hpp"
#include "tests/support/gguf_writer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

using namespace troupe;
using troupe::test::error_of;
using troupe::test::temp_dir;
using troupe::testing::gguf_writer;

namespace {

// The writer's type numbers, as the file stores them.
constexpr auto type_number(gguf::tensor_type t) { return static_cast<std::uint32_t>(t); }
constexpr std::uint32_t k_f32 = type_number(gguf::tensor_type::f32), k_f16 = type_number(gguf::tensor_type::f16),
                        k_q5_0 = type_number(gguf::tensor_type::q5_0), k_q8_0 = type_number(gguf::tensor_type::q8_0),
                        k_q3_k = type_number(gguf::tensor_type::q3_k);

// A one-layer model of hidden 32: 2 heads of 16 (1 KV head), 64 MLP rows,
// vocabulary 8. Element (r, c) of each matrix is a number that names its
// tensor, row and column, so a row read from the wrong place shows.
struct tiny_gguf {
  std::string arch = "llama";
  std::int64_t hidden = 32, heads = 2, kv_heads = 1, head_dim = 16, inter = 64, vocab = 8;
  std::uint32_t matrix_type = k_f32;
  std::function<void(gguf_writer&)> extra_keys = [](gguf_writer&) {};
  std::vector<std::string> skip;                         // tensors left out
  std::vector<std::pair<std::string, std::int64_t>> extra; // more vectors, by name and size
  std::vector<std::string> skip_keys;                    // "{arch}.{key}"s left out
  bool tied = false;

  static auto value(int tensor, std::int64_t r, std::int64_t c) -> float {
    // Sums of powers of two within 19 bits: exact in F32, however compiled.
    return static_cast<float>(tensor * 4) + static_cast<float>(r) / 16.0f + static_cast<float>(c) / 4096.0f;
  }

  auto matrix_bytes(std::size_t id, std::int64_t rows, std::int64_t cols, std::uint32_t type) const -> std::string {
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) v[static_cast<std::size_t>(r * cols + c)] = value(id, r, c);
    if (type == k_f32) return {reinterpret_cast<const char*>(v.data()), v.size() * 4};
    const auto t = gguf::traits(type);
    std::string out(static_cast<std::size_t>(rows * cols / t->block_elements * t->block_bytes), '\0');
    if (type == k_f16) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        const auto h = f32_to_f16(v[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    } else if (type == k_q5_0) { // no quantizer of its own: blocks of d = 0.5 and patterned bits
      for (std::size_t b = 0; b < out.size() / 22; ++b) {
        out[22 * b] = 0x00;
        out[22 * b + 1] = 0x38;
        for (std::size_t j = 2; j < 22; ++j) out[22 * b + j] = static_cast<char>((id * 31 + b * 13 + j * 7) & 0xFF);
      }
    } else if (gguf::can_quantize(static_cast<gguf::tensor_type>(type))) {
      gguf::quantize_row(static_cast<gguf::tensor_type>(type), v.data(), reinterpret_cast<std::byte*>(out.data()),
                         rows * cols);
    } // else zeros of the right size: the reader refuses the type first
    return out;
  }

  void write(const std::filesystem::path& path) const {
    gguf_writer w;
    w.kv_string("general.architecture", arch);
    const auto in = [](const std::vector<std::string>& list, const std::string& x) {
      return std::find(list.begin(), list.end(), x) != list.end();
    };
    const auto u32 = [&](const std::string& key, std::int64_t v) {
      if (!in(skip_keys, arch + key))
        w.kv_u32(arch + key, static_cast<std::uint32_t>(v));
    };
    u32(".embedding_length", hidden);
    u32(".feed_forward_length", inter);
    u32(".block_count", 1);
    u32(".attention.head_count", heads);
    u32(".attention.head_count_kv", kv_heads);
    u32(".context_length", 256);
    w.kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
    w.kv_f32(arch + ".rope.freq_base", 500000.0f);
    w.kv_u32("tokenizer.ggml.bos_token_id", 1);
    w.kv_u32("tokenizer.ggml.eos_token_id", 2);
    extra_keys(w);
    const auto q = static_cast<std::uint64_t>(heads * head_dim), kv = static_cast<std::uint64_t>(kv_heads * head_dim);
    const auto d = static_cast<std::uint64_t>(hidden), ff = static_cast<std::uint64_t>(inter);
    int id = 0;
    const auto add = [&](const std::string& name, std::uint64_t rows, std::uint64_t cols, std::uint32_t type) {
      ++id;
      if (in(skip, name)) return;
      w.tensor(name, {cols, rows}, type, matrix_bytes(id, static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols), type));
    };
    const auto norm = [&](const std::string& name, std::uint64_t n) {
      ++id;
      if (in(skip, name)) return;
      w.tensor(name, {n}, k_f32, matrix_bytes(id, 1, static_cast<std::int64_t>(n), k_f32));
    };
    add("token_embd.weight", static_cast<std::uint64_t>(vocab), d, matrix_type);
    norm("blk.0.attn_norm.weight", d);
    if (arch == "phi3") { // fused, as Phi-3 stores them (the other tensors keep their ids)
      add("blk.0.attn_qkv.weight", q + 2 * kv, d, matrix_type);
      id += 2;
    } else {
      add("blk.0.attn_q.weight", q, d, matrix_type);
      add("blk.0.attn_k.weight", kv, d, matrix_type);
      add("blk.0.attn_v.weight", kv, d, matrix_type);
    }
    add("blk.0.attn_output.weight", d, q, matrix_type);
    norm("blk.0.ffn_norm.weight", d);
    if (arch == "phi3") {
      add("blk.0.ffn_up.weight", 2 * ff, d, matrix_type);
      ++id;
    } else {
      add("blk.0.ffn_gate.weight", ff, d, matrix_type);
      add("blk.0.ffn_up.weight", ff, d, matrix_type);
    }
    add("blk.0.ffn_down.weight", d, ff, matrix_type);
    norm("output_norm.weight", d);
    if (!tied) add("output.weight", static_cast<std::uint64_t>(vocab), d, matrix_type);
    for (const auto& [name, n] : extra) norm(name, static_cast<std::uint64_t>(n));
    w.write(path);
  }
};

auto row_of(const weight_tensor& w, std::int64_t r) -> std::vector<float> {
  std::vector<float> out(static_cast<std::size_t>(w.cols));
  load_row(w, r, out.data());
  return out;
}

auto load_error(const temp_dir& dir, const tiny_gguf& g) -> std::string {
  g.write(dir / "m.gguf");
  return error_of([&] { load_gguf_weights(dir / "m.gguf"); });
}

} // namespace

TEST_CASE("a llama GGUF file maps onto the Hugging Face layout") {
  const temp_dir dir;
  tiny_gguf g;
  g.write(dir / "m.gguf");
  CHECK(gguf::is_gguf_file(dir / "m.gguf"));
  CHECK_FALSE(gguf::is_gguf_file(dir.path()));
  const auto w = load_gguf_weights(dir / "m.gguf");
  const auto& c = w.config;
  CHECK(c.architecture == "LlamaForCausalLM");
  CHECK(c.hidden_size == 32);
  CHECK(c.intermediate_size == 64);
  CHECK(c.num_hidden_layers == 1);
  CHECK(c.num_attention_heads == 2);
  CHECK(c.num_key_value_heads == 1);
  CHECK(c.head_dim == 16);
  CHECK(c.vocab_size == 8);
  CHECK(c.max_position_embeddings == 256);
  CHECK(c.rms_norm_eps == doctest::Approx(1e-5));
  CHECK(c.rope_theta == 500000.0);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.bos_token_id == 1);
  CHECK(c.eos_token_ids == std::vector<token_id>{2});
  CHECK(model_config::load(dir / "m.gguf") == c);

  // Q (tensor 3) and K (tensor 4): HF row h·16 + j·8 + i is the file's row
  // h·16 + 2i + j, llama.cpp's permutation undone.
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t i = 0; i < 8; ++i) {
        const auto hf = h * 16 + j * 8 + i, file = h * 16 + 2 * i + j;
        CHECK(row_of(w.layers[0].wq, hf)[5] == tiny_gguf::value(3, file, 5));
        if (h == 0) CHECK(row_of(w.layers[0].wk, hf)[7] == tiny_gguf::value(4, file, 7));
      }
  // V and the rest in place.
  CHECK(row_of(w.layers[0].wv, 3)[2] == tiny_gguf::value(5, 3, 2));
  CHECK(row_of(w.layers[0].w_down, 31)[63] == tiny_gguf::value(10, 31, 63));
  CHECK(row_of(w.embed, 7)[31] == tiny_gguf::value(1, 7, 31));
  CHECK(row_of(w.lm_head, 2)[0] == tiny_gguf::value(12, 2, 0));
  CHECK(static_cast<const float*>(w.layers[0].mlp_norm.data)[4] == tiny_gguf::value(7, 0, 4));
  CHECK(static_cast<const float*>(w.final_norm.data)[9] == tiny_gguf::value(11, 0, 9));
}

TEST_CASE("quantized matrices are kept in their blocks; a missing head ties to the embedding") {
  const temp_dir dir;
  tiny_gguf g;
  g.matrix_type = k_q8_0;
  g.tied = true;
  g.write(dir / "m.gguf");
  const auto w = load_gguf_weights(dir / "m.gguf");
  CHECK(w.config.tie_word_embeddings);
  CHECK(w.lm_head.data == w.embed.data);
  REQUIRE(w.layers[0].wv.quant == gguf::tensor_type::q8_0);
  CHECK(w.layers[0].wv.row_bytes() == 34);
  CHECK(w.layers[0].wv.type_name() == "Q8_0");
  // Q's rows moved as whole blocks: HF row 8 is the file's row 1, bit for bit.
  const auto f = gguf::file::open(dir / "m.gguf");
  const auto* q = f->find_tensor("blk.0.attn_q.weight");
  std::vector<float> file_row(32);
  gguf::dequantize_row(gguf::tensor_type::q8_0, q->data + 34, file_row.data(), 32);
  CHECK(row_of(w.layers[0].wq, 8) == file_row);
  CHECK(row_of(w.layers[0].wq, 1) != file_row);
}

TEST_CASE("the families' own tensors and keys") {
  const temp_dir dir;
  SUBCASE("qwen2: q/k/v biases, no permutation") {
    tiny_gguf g;
    g.arch = "qwen2";
    g.extra = {{"blk.0.attn_q.bias", 32}, {"blk.0.attn_k.bias", 16}, {"blk.0.attn_v.bias", 16}};
    g.write(dir / "m.gguf");
    const auto w = load_gguf_weights(dir / "m.gguf");
    CHECK(w.config.architecture == "Qwen2ForCausalLM");
    CHECK(static_cast<const float*>(w.layers[0].bk.data)[15] == tiny_gguf::value(14, 0, 15));
    CHECK(row_of(w.layers[0].wq, 1)[0] == tiny_gguf::value(3, 1, 0));
  }
  SUBCASE("gemma2: soft-caps, windows on even layers, norms as stored") {
    tiny_gguf g;
    g.arch = "gemma2";
    g.extra_keys = [](gguf_writer& w) {
      w.kv_f32("gemma2.attn_logit_softcapping", 50.0f);
      w.kv_f32("gemma2.final_logit_softcapping", 30.0f);
      w.kv_u32("gemma2.attention.sliding_window", 4096);
    };
    g.extra = {{"blk.0.post_attention_norm.weight", 32}, {"blk.0.post_ffw_norm.weight", 32}};
    g.tied = true;
    g.write(dir / "m.gguf");
    const auto w = load_gguf_weights(dir / "m.gguf");
    CHECK(w.config.architecture == "Gemma2ForCausalLM");
    CHECK(w.config.attn_logit_softcapping == 50.0);
    CHECK(w.config.final_logit_softcapping == 30.0);
    CHECK(w.config.sliding_window == 4096);
    CHECK(w.config.sliding_layers == std::vector<bool>{true});
    CHECK(w.config.hidden_act == "gelu_pytorch_tanh");
    CHECK(w.config.query_pre_attn_scalar == 16.0); // head_dim: not a 27B model
    // The file's norms already hold 1 + w (llama.cpp's converter adds it).
    CHECK(static_cast<const float*>(w.layers[0].attn_norm.data)[3] == tiny_gguf::value(2, 0, 3));
    CHECK(static_cast<const float*>(w.layers[0].post_mlp_norm.data)[3] == tiny_gguf::value(13, 0, 3));
    CHECK(row_of(w.layers[0].wq, 1)[0] == tiny_gguf::value(3, 1, 0));
  }
  SUBCASE("llama 3.1's rope_freqs become per-dimension divisors") {
    tiny_gguf g;
    g.extra = {{"rope_freqs.weight", 8}};
    g.write(dir / "m.gguf");
    const auto w = load_gguf_weights(dir / "m.gguf");
    REQUIRE(w.config.rope_scaling.type == "freq_factors");
    REQUIRE(w.config.rope_scaling.short_factor.size() == 8);
    CHECK(w.config.rope_scaling.short_factor[6] == tiny_gguf::value(13, 0, 6));
    g.extra = {{"rope_freqs.weight", 16}};
    CHECK(load_error(dir, g) == (dir / "m.gguf").string() +
                                    ": tensor 'rope_freqs.weight' has 16 values, expected head_dim / 2 = 8");
  }
  SUBCASE("phi3: fused q/k/v and gate/up rows as views; longrope's factors") {
    tiny_gguf g;
    g.arch = "phi3";
    g.extra_keys = [](gguf_writer& w) {
      w.kv_string("phi3.rope.scaling.type", "longrope");
      w.kv_u32("phi3.rope.scaling.original_context_length", 64);
      w.kv_f32("phi3.rope.scaling.attn_factor", 1.19f);
    };
    g.extra = {{"rope_factors_long.weight", 8}, {"rope_factors_short.weight", 8}};
    g.write(dir / "m.gguf");
    const auto w = load_gguf_weights(dir / "m.gguf");
    const auto& c = w.config;
    CHECK(c.architecture == "Phi3ForCausalLM");
    REQUIRE(c.rope_scaling.type == "longrope");
    CHECK(c.rope_scaling.original_max_position_embeddings == 64);
    CHECK(c.rope_scaling.factor == 4.0); // context 256 over 64
    CHECK(c.rope_scaling.attention_factor == doctest::Approx(1.19));
    CHECK(c.rope_scaling.long_factor[2] == tiny_gguf::value(13, 0, 2));
    CHECK(c.rope_scaling.short_factor[5] == tiny_gguf::value(14, 0, 5));
    // attn_qkv (tensor 3): q rows 0-31, k 32-47, v 48-63; ffn_up (8): gate, then up.
    CHECK(row_of(w.layers[0].wq, 31)[1] == tiny_gguf::value(3, 31, 1));
    CHECK(row_of(w.layers[0].wk, 0)[1] == tiny_gguf::value(3, 32, 1));
    CHECK(row_of(w.layers[0].wv, 15)[1] == tiny_gguf::value(3, 63, 1));
    CHECK(row_of(w.layers[0].w_gate, 63)[2] == tiny_gguf::value(8, 63, 2));
    CHECK(row_of(w.layers[0].w_up, 0)[2] == tiny_gguf::value(8, 64, 2));
  }
  SUBCASE("F16 matrices are read in place") {
    tiny_gguf g;
    g.matrix_type = k_f16;
    g.write(dir / "m.gguf");
    const auto w = load_gguf_weights(dir / "m.gguf");
    CHECK(w.layers[0].wv.type == dtype::f16);
    CHECK(w.layers[0].wv.data != nullptr);
    CHECK(row_of(w.layers[0].wv, 3)[2] == f16_to_f32(f32_to_f16(tiny_gguf::value(5, 3, 2))));
  }
}

TEST_CASE("what llama.cpp makes of a file: ends of turn by their text, windows on Gemma only, Q5_0 as Q8_0") {
  const temp_dir dir;
  SUBCASE("a chat model's end-of-turn tokens stop it beside the EOS") {
    tiny_gguf g;
    g.extra_keys = [](gguf_writer& w) {
      w.kv_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "hi", "<end_of_turn>", "<|im_end|>", "x", "y"});
    };
    g.write(dir / "m.gguf");
    CHECK(model_config::load(dir / "m.gguf").eos_token_ids == std::vector<token_id>{2, 4, 5});
  }
  SUBCASE("llama.cpp slides no llama layer: the key is read, no window applies") {
    tiny_gguf g;
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("llama.attention.sliding_window", 4096); };
    g.write(dir / "m.gguf");
    CHECK(model_config::load(dir / "m.gguf").sliding_window == 0);
  }
  SUBCASE("gemma3's local RoPE base from rope.freq_base_swa") {
    tiny_gguf g;
    g.arch = "gemma3";
    g.extra_keys = [](gguf_writer& w) { w.kv_f32("gemma3.rope.freq_base_swa", 20000.0f); };
    g.extra = {{"blk.0.attn_q_norm.weight", 16}, {"blk.0.attn_k_norm.weight", 16},
               {"blk.0.post_attention_norm.weight", 32}, {"blk.0.post_ffw_norm.weight", 32}};
    g.write(dir / "m.gguf");
    CHECK(model_config::load(dir / "m.gguf").rope_local_base_freq == 20000.0);
  }
  SUBCASE("Q5_0 matrices (llama-quantize's fallback for Q4_K) held as Q8_0, the same values") {
    tiny_gguf g;
    g.matrix_type = k_q5_0;
    g.write(dir / "m.gguf");
    const auto w = load_gguf_weights(dir / "m.gguf");
    REQUIRE(w.layers[0].wv.quant == gguf::tensor_type::q8_0);
    const auto f = gguf::file::open(dir / "m.gguf");
    std::vector<float> want(32);
    gguf::dequantize_row(gguf::tensor_type::q5_0, f->find_tensor("blk.0.attn_v.weight")->data + 3 * 22, want.data(), 32);
    CHECK(row_of(w.layers[0].wv, 3) == want);
  }
  SUBCASE("the config carries the RoPE factors the weights do") {
    tiny_gguf g;
    g.extra = {{"rope_freqs.weight", 8}};
    g.write(dir / "m.gguf");
    CHECK(model_config::load(dir / "m.gguf") == load_gguf_weights(dir / "m.gguf").config);
  }
  SUBCASE("phi3's longrope from its factor tensors alone (older converters write no scaling key)") {
    tiny_gguf g;
    g.arch = "phi3";
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("phi3.rope.scaling.original_context_length", 64); };
    g.extra = {{"rope_factors_long.weight", 8}, {"rope_factors_short.weight", 8}};
    g.write(dir / "m.gguf");
    const auto c = load_gguf_weights(dir / "m.gguf").config;
    CHECK(c.rope_scaling.type == "longrope");
    CHECK(c.rope_scaling.long_factor[0] == tiny_gguf::value(13, 0, 0));
  }
}

TEST_CASE("a GGUF model troupe cannot compute is refused with one line naming what") {
  const temp_dir dir;
  const auto file = (dir / "m.gguf").string();
  tiny_gguf g;
  SUBCASE("architecture") {
    g.arch = "mamba";
    CHECK(load_error(dir, g) == file + ": general.architecture 'mamba' is not supported (supported: llama, qwen2, "
                                       "qwen3, gemma2, gemma3, phi3, qwen3moe, olmoe, gpt-oss)");
  }
  SUBCASE("shared experts (qwen2moe) and DeepSeek's MLA, by architecture or by key") {
    g.arch = "qwen2moe";
    CHECK(load_error(dir, g).starts_with(file + ": general.architecture 'qwen2moe' is not supported"));
    g.arch = "deepseek2";
    CHECK(load_error(dir, g).starts_with(file + ": general.architecture 'deepseek2' is not supported"));
    g.arch = "llama";
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("llama.expert_shared_count", 1); };
    CHECK(load_error(dir, g) == file + ": key 'llama.expert_shared_count' is not implemented by troupe (loading would ignore it)");
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("llama.attention.kv_lora_rank", 512); };
    CHECK(load_error(dir, g) == file + ": key 'llama.attention.kv_lora_rank' is not implemented by troupe (loading would ignore it)");
  }
  SUBCASE("a key of the architecture troupe does not know") {
    g.extra_keys = [](gguf_writer& w) { w.kv_f32("llama.attention.scale", 0.5f); };
    CHECK(load_error(dir, g) == file + ": key 'llama.attention.scale' is not implemented by troupe (loading would ignore it)");
  }
  SUBCASE("experts: Mixtral's count without its per-token count, or on an architecture without experts") {
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("llama.expert_count", 8); };
    CHECK(load_error(dir, g) == file + ": missing key 'llama.expert_used_count'");
    g.arch = "qwen3";
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("qwen3.expert_count", 8); };
    CHECK(load_error(dir, g) == file + ": key 'qwen3.expert_count': experts are not implemented for qwen3");
  }
  SUBCASE("a window's layer pattern outside gpt-oss (only its reader applies one)") {
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("llama.attention.sliding_window_pattern", 3); };
    CHECK(load_error(dir, g) == file + ": key 'llama.attention.sliding_window_pattern' is not implemented by troupe "
                                       "(loading would ignore it)");
  }
  SUBCASE("a shared expert's tensor") {
    g.extra = {{"blk.0.ffn_up_shexp.weight", 2}};
    CHECK(load_error(dir, g) == file + ": tensor 'blk.0.ffn_up_shexp.weight' is not used by llama as troupe implements it (loading would ignore it)");
  }
  SUBCASE("an unknown RoPE scaling") {
    g.extra_keys = [](gguf_writer& w) { w.kv_string("llama.rope.scaling.type", "su"); };
    CHECK(load_error(dir, g) == file + ": key 'llama.rope.scaling.type' is 'su' (supported: none, linear, yarn, and Phi-3's longrope)");
  }
  SUBCASE("a missing key") {
    g.skip_keys = {"llama.block_count"};
    CHECK(load_error(dir, g) == file + ": missing key 'llama.block_count'");
  }
  SUBCASE("a mistyped key") {
    g.extra_keys = [](gguf_writer& w) { w.kv_string("llama.attention.key_length", "sixteen"); };
    CHECK(load_error(dir, g) == file + ": key 'llama.attention.key_length' is string, expected an integer");
  }
  SUBCASE("a layer count past the file's tensors") {
    g.extra_keys = [](gguf_writer& w) { w.kv_u64("llama.block_count", std::uint64_t{1} << 40); };
    g.skip_keys = {"llama.block_count"};
    CHECK(load_error(dir, g) == file + ": key 'llama.block_count' is 1099511627776, but the file has no tensor "
                                       "'blk.1099511627775.attn_norm.weight'");
  }
  SUBCASE("a second RoPE base outside gemma3") {
    g.extra_keys = [](gguf_writer& w) { w.kv_f32("llama.rope.freq_base_swa", 10000.0f); };
    CHECK(load_error(dir, g) == file + ": key 'llama.rope.freq_base_swa': a second RoPE base is implemented for gemma3 only");
  }
  SUBCASE("a missing tensor") {
    g.skip = {"blk.0.ffn_up.weight"};
    CHECK(load_error(dir, g) == file + ": missing tensor 'blk.0.ffn_up.weight'");
  }
  SUBCASE("a matrix of the wrong shape") {
    g.inter = 96;
    g.skip_keys = {"llama.feed_forward_length"};
    g.extra_keys = [](gguf_writer& w) { w.kv_u32("llama.feed_forward_length", 64); };
    CHECK(load_error(dir, g) == file + ": tensor 'blk.0.ffn_gate.weight' has shape [32, 96], expected [32, 64] (GGUF order, fastest dimension first)");
  }
  SUBCASE("a vector of the wrong length") {
    g.extra = {{"rope_freqs.weight", 3}};
    CHECK(load_error(dir, g) == file + ": tensor 'rope_freqs.weight' has 3 values, expected head_dim / 2 = 8");
  }
  SUBCASE("a tensor nobody uses") {
    g.extra = {{"blk.0.attn_sinks", 2}};
    CHECK(load_error(dir, g) == file + ": tensor 'blk.0.attn_sinks' is not used by llama as troupe implements it (loading would ignore it)");
  }
  SUBCASE("a type troupe does not read") {
    g.hidden = 256; // Q3_K's rows hold 256 values
    g.heads = 16;
    g.kv_heads = 16;
    g.inter = 256;
    g.matrix_type = k_q3_k;
    CHECK(load_error(dir, g) == file + ": tensor 'token_embd.weight' is Q3_K, which troupe does not read (it reads F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, MXFP4)");
  }
}
