#pragma once
// The tests' reference for a GGUF file's tokenizer: the tokenizer.* keys
// llama.cpp's convert_hf_to_gguf.py writes for a model directory, written
// here without the engine (its own JSON and SentencePiece reading), so that
// the engine's GGUF tokenizer is judged against an independent writer.

#include "tests/support/gguf_writer.hpp"

#include <filesystem>

namespace troupe::testing {

/// Adds to `w` the tokenizer keys of `model_dir`, as convert_hf_to_gguf.py
/// does: from tokenizer.model (tokenizer.ggml.model "llama": pieces, scores,
/// types; added_tokens.json and tokenizer_config.json's added_tokens_decoder
/// over them), else from a byte-level BPE tokenizer.json ("gpt2": tokens,
/// types, merges, the pre-tokenizer's llama.cpp name). Then, as gguf-py's
/// SpecialVocab: BOS/EOS/UNK/SEP/PAD/MASK (and EOT/EOM) ids and add_bos /
/// add_eos / add_sep from tokenizer.json's post-processor,
/// tokenizer_config.json and config.json; tokenizer.chat_template from
/// tokenizer_config.json, else chat_template.jinja.
///
/// Where convert_hf_to_gguf.py hashes the ids of a probe text to name the
/// pre-tokenizer, this reads the name off the pre-tokenizer's regexes (what
/// that hash stands for); one it does not know throws std::runtime_error, as
/// does a directory with neither file or a tokenizer.json of another kind.
void write_tokenizer_metadata(troupe::testing::gguf_writer& w, const std::filesystem::path& model_dir);

} // namespace troupe::testing
