#pragma once
// Inside the GGUF loader (gguf_model.cpp, gguf_weights.cpp) only: reading a
// file's tensors by name, each checked against the shape the config gives,
// each marked used so that a tensor nobody asked for is refused.

#include "engine/formats/gguf.hpp"
#include "engine/formats/gguf_quant.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/formats/mxfp4.hpp"
#include "engine/formats/safetensors.hpp"
#include "engine/model/model_weights.hpp"

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::gguf_detail {

/// A vector tensor of a float type (F32, F16, BF16) widened into out; one
/// line naming it where it is of another type.
inline void widen_floats(const gguf::file& f, const gguf::tensor& t, const std::string& name, float* out) {
  if (t.type != gguf::tensor_type::f32 && t.type != gguf::tensor_type::f16 && t.type != gguf::tensor_type::bf16)
    fail(f.path(), "tensor '" + name + "' is " + std::string(gguf::type_name(t.type)) + ", expected F32, F16 or BF16");
  gguf::dequantize_row(t.type, t.data, out, t.numel());
}

/// Rows of the matrices and the tensors of one file, each checked and
/// marked used; check_all_used then refuses what nobody asked for.
class tensor_reader {
public:
  tensor_reader(const gguf::file& f, model_weights& out) : f_(f), out_(out) {}

  /// A [rows, cols] matrix, used in place.
  auto matrix(const std::string& name, std::int64_t rows, std::int64_t cols) -> weight_tensor {
    return matrix_of(get(name, {cols, rows}), name, rows, cols);
  }

  /// A 3-D tensor of `experts` matrices [rows, cols] (ffn_gate_exps, ...):
  /// a view of each expert's slice, used in place.
  auto experts(const std::string& name, std::int64_t experts, std::int64_t rows, std::int64_t cols)
      -> std::vector<weight_tensor> {
    const auto all = matrix_of(get(name, {cols, rows, experts}), name, experts * rows, cols);
    std::vector<weight_tensor> out;
    for (std::int64_t e = 0; e < experts; ++e) out.push_back(all.rows_view(e * rows, rows));
    return out;
  }

  /// tensor t as a [rows, cols] matrix of its type.
  auto matrix_of(const gguf::tensor& t, const std::string& name, std::int64_t rows, std::int64_t cols)
      -> weight_tensor {
    weight_tensor w;
    w.rows = rows;
    w.cols = cols;
    w.data = t.data;
    switch (t.type) {
      case gguf::tensor_type::f32: w.type = dtype::f32; break;
      case gguf::tensor_type::f16: w.type = dtype::f16; break;
      case gguf::tensor_type::bf16: w.type = dtype::bf16; break;
      case gguf::tensor_type::q8_0:
      case gguf::tensor_type::q4_0:
      case gguf::tensor_type::q4_k:
      case gguf::tensor_type::q5_k:
      case gguf::tensor_type::q6_k: w.quant = t.type; break;
      case gguf::tensor_type::q5_0: {
        // Where a Q4_K row is not whole 256-value blocks, llama-quantize
        // writes Q5_0: held as Q8_0, exactly (gguf_quant's q5_0_to_q8_0).
        w.quant = gguf::tensor_type::q8_0;
        auto bytes = std::shared_ptr<std::byte[]>(new std::byte[static_cast<std::size_t>(rows * w.row_bytes())]);
        gguf::q5_0_to_q8_0(t.data, bytes.get(), rows * cols);
        w.data = bytes.get();
        out_.storage.push_back(std::move(bytes));
        break;
      }
      case gguf::tensor_type::mxfp4:
        // gpt-oss's experts, used in place and multiplied as the Q8_0 blocks
        // they equal (mxfp4.hpp), as llama.cpp does.
        if (!mxfp4::exact_in_q8_0(t.data, rows * cols))
          fail(f_.path(), "tensor '" + name + "' has an MXFP4 block scale outside F16's range, which troupe does not read");
        w.quant = t.type;
        break;
      default:
        fail(f_.path(), "tensor '" + name + "' is " + std::string(gguf::type_name(t.type)) +
                            ", which troupe does not read (it reads F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, "
                            "Q6_K, MXFP4)");
    }
    return w;
  }

  /// A vector widened to an F32 copy the weights own.
  auto vector(const std::string& name, std::int64_t size) -> weight_tensor {
    auto values = floats(name, size);
    weight_tensor w{dtype::f32, values.get(), 1, size, weight_layout::row_major, {}};
    out_.storage.push_back(std::move(values));
    return w;
  }

  /// A vector's values as F32 (any float type).
  auto floats(const std::string& name, std::int64_t size) -> std::shared_ptr<float[]> {
    auto values = std::shared_ptr<float[]>(new float[static_cast<std::size_t>(size)]);
    widen_floats(f_, get(name, {size}), name, values.get());
    return values;
  }

  /// A [rows, cols] matrix of biases (gpt-oss's experts') widened to an F32
  /// copy the weights own.
  auto bias_matrix(const std::string& name, std::int64_t rows, std::int64_t cols) -> weight_tensor {
    auto values = std::shared_ptr<float[]>(new float[static_cast<std::size_t>(rows * cols)]);
    widen_floats(f_, get(name, {cols, rows}), name, values.get());
    weight_tensor w{dtype::f32, values.get(), rows, cols, weight_layout::row_major, {}};
    out_.storage.push_back(std::move(values));
    return w;
  }

  /// A matrix of `heads` heads of head_dim rows each, its rows put back from
  /// llama.cpp's order (each head's two halves interleaved, for RoPE on
  /// adjacent pairs) into Hugging Face's (rotate-half): a copy.
  auto unpermuted(const std::string& name, std::int64_t heads, std::int64_t head_dim, std::int64_t cols)
      -> weight_tensor {
    auto w = matrix(name, heads * head_dim, cols);
    const auto row_bytes = static_cast<std::size_t>(w.row_bytes());
    auto bytes = std::shared_ptr<std::byte[]>(new std::byte[row_bytes * static_cast<std::size_t>(w.rows)]);
    const std::int64_t half = head_dim / 2;
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t j = 0; j < 2; ++j)
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t hf_row = h * head_dim + j * half + i, file_row = h * head_dim + 2 * i + j;
          std::memcpy(bytes.get() + static_cast<std::size_t>(hf_row) * row_bytes, w.row(file_row), row_bytes);
        }
    w.data = bytes.get();
    out_.storage.push_back(std::move(bytes));
    return w;
  }

  /// Counts a tensor another reader took (its shape checked again).
  void mark_used(const std::string& name, std::int64_t size) { (void)get(name, {size}); }

  void check_all_used(const std::string& arch) const {
    for (const auto& t : f_.tensors())
      if (!used_.contains(t.name))
        fail(f_.path(), "tensor '" + std::string(t.name) + "' is not used by " + arch +
                            " as troupe implements it (loading would ignore it)");
  }

private:
  auto get(const std::string& name, const std::vector<std::int64_t>& ne) -> const gguf::tensor& {
    const auto* t = f_.find_tensor(name);
    if (t == nullptr) fail(f_.path(), "missing tensor '" + name + "'");
    if (t->ne != ne)
      fail(f_.path(), "tensor '" + name + "' has shape " + format_shape(t->ne) + ", expected " + format_shape(ne) +
                          " (GGUF order, fastest dimension first)");
    used_.insert(t->name);
    return *t;
  }

  const gguf::file& f_;
  model_weights& out_;
  std::set<std::string_view> used_;
};

} // namespace troupe::gguf_detail
