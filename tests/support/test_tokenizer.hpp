#pragma once
// A real SentencePiece model for tests, trained on the Debian licence texts.

#include "engine/tokenizer/tokenizer.hpp"

#include <filesystem>
#include <vector>

namespace troupe::testing {

/// A 2000-piece Llama-like model (see train_tokenizer) trained on
/// licence_files() on first use, once per process, into a temp_dir removed at
/// exit.
auto test_tokenizer() -> const tokenizer&;

/// Where test_tokenizer()'s model file lies.
auto test_tokenizer_file() -> const std::filesystem::path&;

} // namespace troupe::testing
