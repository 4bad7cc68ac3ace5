// The CUDA backend's refusals, checked where no GPU is: a model it does not
// implement is refused at start-up in one line, before the library is opened.

#include "engine/cuda/cuda_backend.hpp"
#include "engine/model/presets.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using namespace troupe;

TEST_CASE("cuda_supports: Llama-shaped models pass, other families and features are named") {
  CHECK(cuda_supports(*preset_config("llama-3.2-1b")).empty());
  CHECK(cuda_supports(*preset_config("smollm2-360m")).empty());
  CHECK(cuda_supports(*preset_config("qwen2.5-0.5b")) ==
        "the CUDA backend does not implement Qwen2ForCausalLM (it runs LlamaForCausalLM and MistralForCausalLM; "
        "use a cpu device)");
  for (const auto* name : {"qwen3-0.6b", "gemma-2-2b", "phi-3.5-mini"})
    CHECK(cuda_supports(*preset_config(name)).starts_with("the CUDA backend does not implement "));
  auto mistral = *preset_config("tiny");
  mistral.architecture = "MistralForCausalLM";
  mistral.sliding_window = 4096;
  mistral.max_position_embeddings = 32768;
  CHECK(cuda_supports(mistral) ==
        "the CUDA backend does not implement sliding-window attention (sliding_window 4096; use a cpu device)");
  mistral.sliding_window = 32768; // never slides within the context
  CHECK(cuda_supports(mistral).empty());
  CHECK(cuda_supports(*preset_config("mixtral-8x7b")) ==
        "the CUDA backend does not implement mixture-of-experts models (MixtralForCausalLM, 8 experts; use a cpu "
        "device)");
  for (const auto* name : {"qwen3-30b-a3b", "olmoe-1b-7b"})
    CHECK(cuda_supports(*preset_config(name)).starts_with("the CUDA backend does not implement mixture-of-experts"));
  auto yarn = *preset_config("tiny");
  yarn.rope_scaling.type = "yarn";
  CHECK(cuda_supports(yarn) ==
        "the CUDA backend does not implement rope_scaling type 'yarn' (it has linear and llama3; use a cpu device)");
}

namespace {

// What load_cuda_executor throws for w (default options), or "".
auto load_error(const model_weights& w) -> std::string {
  try {
    load_cuda_executor(w, cuda::cuda_executor_options{});
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("load_cuda_executor refuses an unsupported model before looking for the library") {
  model_weights w;
  w.config = *preset_config("gemma-2-2b");
  CHECK(load_error(w).starts_with("the CUDA backend does not implement Gemma2ForCausalLM"));
}

TEST_CASE("load_cuda_executor refuses quantized weights with one line") {
  model_weights w;
  w.config = *preset_config("tinyllama-1.1b");
  w.layers.resize(2);
  w.layers[1].w_down.quant = gguf::tensor_type::q4_k;
  CHECK(load_error(w) == "the CUDA backend does not implement Q4_K weights (use a cpu device)");
}
