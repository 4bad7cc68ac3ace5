#include "engine/model/model_weights.hpp"

#include "engine/model/gguf_model.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/formats/mxfp4.hpp"
#include "engine/formats/safetensors.hpp"

#include <simdjson.h>

#include <initializer_list>
#include <map>
#include <set>
#include <string>

namespace troupe {

namespace {

/// Finds tensors by HF name in model.safetensors or in the shards an index
/// names, opening each shard once, on first use.
class tensor_source {
public:
  explicit tensor_source(const std::filesystem::path& dir) : dir_(dir) {
    const auto single = dir / "model.safetensors";
    index_path_ = dir / "model.safetensors.index.json";
    std::error_code ec;
    if (std::filesystem::exists(single, ec)) {
      single_ = open(single);
      return;
    }
    if (!std::filesystem::exists(index_path_, ec)) {
      for (const auto* pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
        if (std::filesystem::exists(dir / pickle, ec))
          fail(dir / pickle, "PyTorch pickle checkpoints are not read; convert the model to safetensors");
      fail(dir, "no model.safetensors or model.safetensors.index.json");
    }
    read_index();
  }

  /// The tensor and the file holding it; throws "<file>: missing tensor 'name'".
  auto get(const std::string& name) -> std::pair<const tensor_info*, const safetensors_file*> {
    const safetensors_file* file = single_.get();
    if (file == nullptr) {
      const auto it = weight_map_.find(name);
      if (it == weight_map_.end()) fail(index_path_, "missing tensor '" + name + "'");
      auto& shard = shards_[it->second];
      if (!shard) shard = open(dir_ / it->second);
      file = shard.get();
    }
    const auto* info = file->find(name);
    if (info == nullptr) fail(file->path(), "missing tensor '" + name + "'");
    return {info, file};
  }

  /// Every tensor name of the checkpoint, with the file that holds it.
  auto names() const -> std::vector<std::pair<std::string, std::filesystem::path>> {
    std::vector<std::pair<std::string, std::filesystem::path>> out;
    if (single_) {
      for (const auto& t : single_->tensors()) out.emplace_back(t.name, single_->path());
      return out;
    }
    for (const auto& [name, shard] : weight_map_) out.emplace_back(name, dir_ / shard);
    return out;
  }

  /// Every file opened, to keep the mappings alive.
  auto files() const -> std::vector<std::shared_ptr<const safetensors_file>> {
    if (single_) return {single_};
    std::vector<std::shared_ptr<const safetensors_file>> out;
    for (const auto& [name, file] : shards_)
      if (file) out.push_back(file);
    return out;
  }

private:
  static auto open(const std::filesystem::path& file) -> std::shared_ptr<const safetensors_file> {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) fail(file, "file not found");
    return safetensors_file::open(file);
  }

  void read_index() {
    namespace dom = simdjson::dom;
    simdjson::padded_string text;
    if (simdjson::padded_string::load(index_path_.string()).get(text) != simdjson::SUCCESS)
      fail(index_path_, "cannot read");
    dom::parser parser;
    dom::element doc;
    if (parser.parse(text).get(doc) != simdjson::SUCCESS) fail(index_path_, "not valid JSON");
    dom::object map;
    if (doc["weight_map"].get_object().get(map) != simdjson::SUCCESS)
      fail(index_path_, "has no weight_map object");
    for (const auto field : map) {
      std::string_view shard;
      if (field.value.get_string().get(shard) != simdjson::SUCCESS || shard.empty() ||
          std::filesystem::path(shard).is_absolute())
        fail(index_path_, "weight_map entry '" + std::string(field.key) + "' is not a relative file name");
      weight_map_.emplace(std::string(field.key), std::string(shard));
      shards_.emplace(std::string(shard), nullptr);
    }
  }

  std::filesystem::path dir_;
  std::filesystem::path index_path_;
  std::shared_ptr<const safetensors_file> single_;
  std::map<std::string, std::string> weight_map_; // tensor -> shard file name
  std::map<std::string, std::shared_ptr<const safetensors_file>> shards_;
};

/// Builds model_weights' tensors, checking each shape against the config.
class weight_loader {
public:
  weight_loader(const std::filesystem::path& dir, model_weights& out) : source_(dir), out_(out) {}

  auto matrix(const std::string& name, std::int64_t rows, std::int64_t cols) -> weight_tensor {
    const auto* info = get_float(name, {rows, cols});
    return {info->type, info->data, rows, cols, weight_layout::row_major, {}};
  }

  /// A tensor's bytes as stored (gpt-oss's U8 MXFP4 blocks and scales).
  auto raw(const std::string& name, const std::vector<std::int64_t>& shape, dtype type) -> const std::uint8_t* {
    const auto* info = get(name, shape);
    if (info->type != type)
      fail(source_.get(name).second->path(), "tensor '" + name + "' is " + std::string(dtype_name(info->type)) +
                                                 ", expected " + std::string(dtype_name(type)));
    return reinterpret_cast<const std::uint8_t*>(info->data);
  }

  /// A [rows, cols] tensor (a matrix of biases) widened to an F32 copy the weights own.
  auto floats(const std::string& name, std::int64_t rows, std::int64_t cols) -> weight_tensor {
    const auto* info = get_float(name, {rows, cols});
    auto values = std::shared_ptr<float[]>(new float[static_cast<std::size_t>(rows * cols)]);
    for (std::int64_t i = 0; i < rows * cols; ++i)
      values[static_cast<std::size_t>(i)] = load_as_f32(info->type, info->data, static_cast<std::size_t>(i));
    out_.storage.push_back(values);
    return {dtype::f32, values.get(), rows, cols, weight_layout::row_major, {}};
  }

  auto storage() -> std::vector<std::shared_ptr<const void>>& { return out_.storage; }

  /// A norm vector (or a bias), widened to an F32 copy the weights own;
  /// plus_one: Gemma's RMSNorm, which scales by 1 + w.
  auto norm(const std::string& name, std::int64_t size, bool plus_one = false) -> weight_tensor {
    const auto* info = get_float(name, {size});
    auto values = std::shared_ptr<float[]>(new float[static_cast<std::size_t>(size)]);
    for (std::int64_t i = 0; i < size; ++i)
      values[static_cast<std::size_t>(i)] =
          (plus_one ? 1.0f : 0.0f) + load_as_f32(info->type, info->data, static_cast<std::size_t>(i));
    out_.storage.push_back(values);
    return {dtype::f32, values.get(), 1, size, weight_layout::row_major, {}};
  }

  /// Splits a fused matrix [sum(parts), cols] into row views, no copy (Phi-3's
  /// qkv_proj and gate_up_proj).
  auto split(const std::string& name, std::initializer_list<std::int64_t> parts, std::int64_t cols)
      -> std::vector<weight_tensor> {
    std::int64_t rows = 0;
    for (const auto n : parts) rows += n;
    const auto whole = matrix(name, rows, cols);
    std::vector<weight_tensor> out;
    std::int64_t first = 0;
    for (const auto n : parts) {
      out.push_back(whole.rows_view(first, n));
      first += n;
    }
    return out;
  }

  /// Fails on the first tensor of the checkpoint that no get() asked for:
  /// a weight the forward pass would silently leave out. Rotary caches and a
  /// tied head's copy are derived data, as transformers treats them.
  void check_all_used(bool tied) const {
    for (const auto& [name, file] : source_.names()) {
      if (used_.contains(name) || name.ends_with("rotary_emb.inv_freq") || (tied && name == "lm_head.weight"))
        continue;
      fail(file, "tensor '" + name + "' is not used by " + out_.config.architecture +
                     " as troupe implements it (loading would ignore it)");
    }
  }

  void keep_files() {
    for (auto& f : source_.files()) out_.storage.push_back(std::move(f));
  }

private:
  /// get() of a tensor of real numbers (F32, F16, BF16): U8 bytes are refused.
  auto get_float(const std::string& name, const std::vector<std::int64_t>& expected) -> const tensor_info* {
    const auto* info = get(name, expected);
    if (!is_float(info->type))
      fail(source_.get(name).second->path(), "tensor '" + name + "' is " + std::string(dtype_name(info->type)) +
                                                 ", expected F32, F16 or BF16");
    return info;
  }

  auto get(const std::string& name, const std::vector<std::int64_t>& expected) -> const tensor_info* {
    const auto found = source_.get(name);
    if (found.first->shape != expected)
      fail(found.second->path(), "tensor '" + name + "' has shape " + format_shape(found.first->shape) +
                                     ", expected " + format_shape(expected));
    used_.insert(name);
    return found.first;
  }

  tensor_source source_;
  model_weights& out_;
  std::set<std::string> used_;
};

/// A mixture of experts' router and each expert's three matrices: Qwen3-MoE
/// and OLMoE name them mlp.gate and mlp.experts.{e}.{gate,up,down}_proj,
/// Mixtral block_sparse_moe.gate and .experts.{e}.{w1,w3,w2}.
auto load_experts(weight_loader& load, const std::string& layer, const model_config& c) -> expert_weights {
  const bool mixtral = c.architecture == "MixtralForCausalLM";
  const auto base = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  const auto d = c.hidden_size, inter = c.moe_intermediate_size;
  expert_weights e;
  e.router = load.matrix(base + "gate.weight", c.num_experts, d);
  for (std::int64_t x = 0; x < c.num_experts; ++x) {
    const auto p = base + "experts." + std::to_string(x) + ".";
    e.gate.push_back(load.matrix(p + (mixtral ? "w1.weight" : "gate_proj.weight"), inter, d));
    e.up.push_back(load.matrix(p + (mixtral ? "w3.weight" : "up_proj.weight"), inter, d));
    e.down.push_back(load.matrix(p + (mixtral ? "w2.weight" : "down_proj.weight"), d, inter));
  }
  return e;
}

/// One of gpt-oss's MXFP4 expert tensors ([experts, rows, cols / 32, 16]
/// blocks, [experts, rows, cols / 32] scales) as MXFP4 matrices in ggml's
/// block layout (mxfp4.hpp; a copy: the checkpoint keeps blocks and scales
/// apart): per expert, the rows first, first + stride, ... of each.
auto mxfp4_experts(weight_loader& load, const std::string& name, const model_config& c, std::int64_t stored_rows,
                   std::int64_t first, std::int64_t stride, std::int64_t cols) -> std::vector<weight_tensor> {
  const auto e = c.num_experts, nb = cols / 32;
  const auto* blocks = load.raw(name + "_blocks", {e, stored_rows, nb, 16}, dtype::u8);
  const auto* scales = load.raw(name + "_scales", {e, stored_rows, nb}, dtype::u8);
  const std::int64_t rows = stored_rows / stride, row_bytes = nb * mxfp4::block_bytes;
  auto bytes = std::shared_ptr<std::byte[]>(new std::byte[static_cast<std::size_t>(e * rows * row_bytes)]);
  std::vector<weight_tensor> out;
  for (std::int64_t x = 0; x < e; ++x) {
    weight_tensor w{dtype::f32, bytes.get() + x * rows * row_bytes, rows, cols, weight_layout::row_major,
                    gguf::tensor_type::mxfp4};
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto src = x * stored_rows + first + r * stride;
      std::byte* row = bytes.get() + (x * rows + r) * row_bytes;
      mxfp4::from_hf(blocks + src * nb * 16, scales + src * nb, row, cols);
      if (!mxfp4::exact_in_q8_0(row, cols))
        throw model_error(name + "_scales: an MXFP4 block scale outside F16's range, which troupe does not read");
    }
    out.push_back(w);
  }
  load.storage().push_back(std::move(bytes));
  return out;
}

/// gpt-oss's router (mlp.router) and experts, MXFP4 in its official
/// checkpoints: gate_up_proj interleaves gate (even rows) and up (odd).
auto load_gpt_oss_experts(weight_loader& load, const std::string& layer, const model_config& c) -> expert_weights {
  const auto base = layer + "mlp.";
  const auto d = c.hidden_size, inter = c.moe_intermediate_size, n = c.num_experts;
  expert_weights e;
  e.router = load.matrix(base + "router.weight", n, d);
  e.router_bias = load.norm(base + "router.bias", n);
  e.gate = mxfp4_experts(load, base + "experts.gate_up_proj", c, 2 * inter, 0, 2, d);
  e.up = mxfp4_experts(load, base + "experts.gate_up_proj", c, 2 * inter, 1, 2, d);
  e.down = mxfp4_experts(load, base + "experts.down_proj", c, d, 0, 1, inter);
  const auto gate_up_bias = load.floats(base + "experts.gate_up_proj_bias", n, 2 * inter);
  // De-interleaved: rows of [experts, inter], copies the weights own.
  for (const auto& [b, offset] : {std::pair{&e.gate_bias, 0}, std::pair{&e.up_bias, 1}}) {
    auto values = std::shared_ptr<float[]>(new float[static_cast<std::size_t>(n * inter)]);
    const auto* all = static_cast<const float*>(gate_up_bias.data);
    for (std::int64_t i = 0; i < n * inter; ++i) values[static_cast<std::size_t>(i)] = all[2 * i + offset];
    *b = {dtype::f32, values.get(), n, inter, weight_layout::row_major, {}};
    load.storage().push_back(std::move(values));
  }
  e.down_bias = load.floats(base + "experts.down_proj_bias", n, d);
  return e;
}

/// Layer p's attention: q/k/v (Phi-3's fused), their biases (Qwen2,
/// gpt-oss), q/k norms (Gemma's 1 + w), o_proj, gpt-oss's bias and sinks.
void load_attention(weight_loader& load, const model_config& c, const std::string& p, layer_weights& l) {
  const auto fam = c.family();
  const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
  const auto d = c.hidden_size, q_rows = c.num_attention_heads * c.head_dim;
  const auto kv_rows = c.num_key_value_heads * c.head_dim;
  l.attn_norm = load.norm(p + "input_layernorm.weight", d, gemma);
  if (fam == model_family::phi3) {
    const auto qkv = load.split(p + "self_attn.qkv_proj.weight", {q_rows, kv_rows, kv_rows}, d);
    l.wq = qkv[0];
    l.wk = qkv[1];
    l.wv = qkv[2];
  } else {
    l.wq = load.matrix(p + "self_attn.q_proj.weight", q_rows, d);
    l.wk = load.matrix(p + "self_attn.k_proj.weight", kv_rows, d);
    l.wv = load.matrix(p + "self_attn.v_proj.weight", kv_rows, d);
  }
  if (fam == model_family::qwen2 || fam == model_family::gpt_oss) {
    l.bq = load.norm(p + "self_attn.q_proj.bias", q_rows);
    l.bk = load.norm(p + "self_attn.k_proj.bias", kv_rows);
    l.bv = load.norm(p + "self_attn.v_proj.bias", kv_rows);
  }
  if (fam == model_family::qwen3 || fam == model_family::gemma3) {
    l.q_norm = load.norm(p + "self_attn.q_norm.weight", c.head_dim, gemma);
    l.k_norm = load.norm(p + "self_attn.k_norm.weight", c.head_dim, gemma);
  } else if (fam == model_family::olmoe) {
    l.q_norm = load.norm(p + "self_attn.q_norm.weight", q_rows);
    l.k_norm = load.norm(p + "self_attn.k_norm.weight", kv_rows);
  }
  l.wo = load.matrix(p + "self_attn.o_proj.weight", d, q_rows);
  if (fam == model_family::gpt_oss) {
    l.bo = load.norm(p + "self_attn.o_proj.bias", d);
    l.sinks = load.norm(p + "self_attn.sinks", c.num_attention_heads);
  }
}

/// Layer p's MLP and its norms: dense (Phi-3's gate and up fused), or a
/// mixture of experts.
void load_mlp(weight_loader& load, const model_config& c, const std::string& p, layer_weights& l) {
  const auto fam = c.family();
  const auto d = c.hidden_size, inter = c.intermediate_size;
  if (fam == model_family::gemma2 || fam == model_family::gemma3) {
    l.post_attn_norm = load.norm(p + "post_attention_layernorm.weight", d, true);
    l.mlp_norm = load.norm(p + "pre_feedforward_layernorm.weight", d, true);
    l.post_mlp_norm = load.norm(p + "post_feedforward_layernorm.weight", d, true);
  } else {
    l.mlp_norm = load.norm(p + "post_attention_layernorm.weight", d);
  }
  if (c.is_moe()) {
    l.experts = fam == model_family::gpt_oss ? load_gpt_oss_experts(load, p, c) : load_experts(load, p, c);
    return;
  }
  if (fam == model_family::phi3) {
    const auto gate_up = load.split(p + "mlp.gate_up_proj.weight", {inter, inter}, d);
    l.w_gate = gate_up[0];
    l.w_up = gate_up[1];
  } else {
    l.w_gate = load.matrix(p + "mlp.gate_proj.weight", inter, d);
    l.w_up = load.matrix(p + "mlp.up_proj.weight", inter, d);
  }
  l.w_down = load.matrix(p + "mlp.down_proj.weight", d, inter);
}

} // namespace

auto model_weights::load(const std::filesystem::path& dir) -> model_weights {
  if (gguf::is_gguf_file(dir)) return load_gguf_weights(dir);
  model_weights w;
  w.config = model_config::load(dir);
  const auto& c = w.config;
  weight_loader load(dir, w);
  const auto d = c.hidden_size;
  const bool gemma = c.family() == model_family::gemma2 || c.family() == model_family::gemma3;
  if (c.family() == model_family::gpt_oss && !c.mxfp4_experts)
    fail(dir / "config.json", "gpt-oss's unquantized experts (no quantization_config) are not read: use its MXFP4 "
                              "checkpoint or a GGUF file");
  w.embed = load.matrix("model.embed_tokens.weight", c.vocab_size, d);
  w.layers.reserve(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const auto p = "model.layers." + std::to_string(i) + ".";
    layer_weights& l = w.layers.emplace_back();
    load_attention(load, c, p, l);
    load_mlp(load, c, p, l);
  }
  w.final_norm = load.norm("model.norm.weight", d, gemma);
  // Tied checkpoints (Llama 3.2 1B) usually omit lm_head.weight; when present
  // it is a copy of the embedding, and transformers ignores it too.
  w.lm_head = c.tie_word_embeddings ? w.embed : load.matrix("lm_head.weight", c.vocab_size, d);
  load.check_all_used(c.tie_word_embeddings);
  load.keep_files();
  return w;
}

} // namespace troupe
