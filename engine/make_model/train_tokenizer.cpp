#include "engine/make_model/train_tokenizer.hpp"

#include "engine/formats/model_error.hpp"

#include <sentencepiece_trainer.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <unordered_map>

namespace troupe {
namespace {

/// Feeds the trainer one line at a time, file after file. Paths never go
/// through the trainer's comma-separated "input" flag, so any name works.
class line_iterator final : public sentencepiece::SentenceIterator {
public:
  explicit line_iterator(const std::vector<std::filesystem::path>& files) : files_(&files) {
    advance();
  }

  auto done() const -> bool override { return done_; }
  auto Next() -> void override { advance(); }
  auto value() const -> const std::string& override { return line_; }
  auto status() const -> sentencepiece::util::Status override { return status_; }

private:
  auto advance() -> void {
    while (!done_) {
      if (in_.is_open() && std::getline(in_, line_)) return;
      if (in_.is_open() && in_.bad()) return fail((*files_)[next_file_ - 1]);
      in_.close();
      if (next_file_ == files_->size()) {
        done_ = true;
        return;
      }
      in_.clear();
      in_.open((*files_)[next_file_++], std::ios::binary);
      if (!in_) return fail((*files_)[next_file_ - 1]);
    }
  }

  auto fail(const std::filesystem::path& file) -> void {
    status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound,
                                          file.string() + ": cannot read");
    done_ = true;
  }

  const std::vector<std::filesystem::path>* files_;
  std::size_t next_file_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

} // namespace

void train_tokenizer(const std::vector<std::filesystem::path>& input_files, int vocab_size,
                     const std::filesystem::path& out_model_file) {
  for (const auto& file : input_files)
    if (!std::ifstream(file, std::ios::binary)) fail(file, "cannot read");
  const auto args = std::unordered_map<std::string, std::string>{
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"add_dummy_prefix", "true"},
      {"remove_extra_whitespaces", "false"},
      {"normalization_rule_name", "identity"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"character_coverage", "0.99995"},
      {"max_sentence_length", "16384"},
      {"num_threads", "2"},
      {"minloglevel", "2"}, // errors only
  };
  auto lines = line_iterator{input_files};
  auto model = std::string{};
  if (const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
      !status.ok())
    fail(out_model_file, std::string("training failed: ") + status.message());
  auto out = std::ofstream(out_model_file, std::ios::binary | std::ios::trunc);
  if (!out.write(model.data(), static_cast<std::streamsize>(model.size())) || !out.flush())
    fail(out_model_file, "cannot write");
}

auto license_corpus_files() -> std::vector<std::filesystem::path> {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) fail("/usr/share/common-licenses", "no licence texts to train on");
  return files;
}

} // namespace troupe
