#include "engine/cpu/cpu_model.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/make_model/tiny_model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/make_model/train_tokenizer.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

using namespace troupe;

namespace {

auto slurp(const std::filesystem::path& p) -> std::string {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TEST_CASE("make-model tiny: a complete, deterministic, few-MB model directory") {
  testing::temp_dir a, b;
  make_model("tiny", a.path(), 3);
  make_model("tiny", b.path(), 3);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"}) {
    CAPTURE(f);
    CHECK(std::filesystem::file_size(a / f) > 0);
    CHECK(slurp(a / f) == slurp(b / f));
  }
  CHECK(std::filesystem::file_size(a / "model.safetensors") < 8'000'000);
  const auto w = model_weights::load(a.path());
  CHECK(w.config.vocab_size == 2000);
  // Attention and MLP weights are random and non-zero in every layer.
  for (const auto& l : w.layers)
    for (const auto* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      double sum_sq = 0.0;
      for (std::int64_t i = 0; i < t->numel(); ++i) {
        const double x = load_as_f32(t->type, t->data, static_cast<std::size_t>(i));
        sum_sq += x * x;
      }
      CHECK(sum_sq > 0.0);
    }
}

TEST_CASE("the tiny model's next-token choice follows the corpus bigrams") {
  testing::temp_dir dir;
  make_model("tiny", dir.path(), 1);
  const auto w = model_weights::load(dir.path());
  const auto tok = tokenizer::load(dir / "tokenizer.model");

  // Successor counts, computed here independently of the fitting code.
  std::map<token_id, std::map<token_id, int>> next;
  std::map<token_id, int> freq;
  for (const auto& f : license_corpus_files()) {
    const auto ids = tok.encode(slurp(f), false);
    for (std::size_t i = 1; i < ids.size(); ++i) {
      ++next[ids[i - 1]][ids[i]];
      ++freq[ids[i - 1]];
    }
  }
  std::vector<std::pair<int, token_id>> by_freq;
  for (auto [id, n] : freq) by_freq.emplace_back(n, id);
  std::sort(by_freq.rbegin(), by_freq.rend());
  by_freq.resize(200);

  cpu_model m(w, 16, 1);
  std::vector<float> logits;
  const std::vector<block_id> table{0};
  int agree = 0;
  for (auto [count, id] : by_freq) {
    const std::vector<token_id> one{id};
    const cpu_model::chunk c[] = {{one, 0, table}};
    m.forward(c, false, logits);
    const auto model_top = static_cast<token_id>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const auto& succ = next[id];
    const auto corpus_top = std::max_element(succ.begin(), succ.end(), [](auto& x, auto& y) {
                              return x.second < y.second;
                            })->first;
    agree += model_top == corpus_top;
  }
  // Chance would be 1 in 2000; the fitted head agrees on most common tokens.
  MESSAGE("top-1 agreement with the corpus on the 200 commonest tokens: " << agree);
  CHECK(agree >= 80);
}
