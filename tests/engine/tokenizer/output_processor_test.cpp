#include "engine/tokenizer/output_processor.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

using namespace troupe;

namespace {

struct run {
  std::string text;
  finish_reason reason = finish_reason::none;
  std::string stop_reason;
  int tokens_fed = 0;
};

auto feed(const tokenizer& tok, const sampling_params& p, const std::vector<token_id>& ids,
          std::vector<token_id> eos = {}) -> run {
  output_processor out(tok, p, std::move(eos), true);
  run r;
  for (auto id : ids) {
    ++r.tokens_fed;
    auto d = out.on_token(id);
    // Nothing shown may contain a stop string, even across pieces.
    r.text += d.text;
    for (const auto& s : p.stop) CHECK(r.text.find(s) == std::string::npos);
    if (d.finished != finish_reason::none) {
      r.reason = d.finished;
      r.stop_reason = d.stop_reason;
      break;
    }
  }
  return r;
}

} // namespace

TEST_CASE("text streams out whole and max_tokens finishes with length") {
  const auto& tok = testing::test_tokenizer();
  const std::string text = "Permission is hereby granted, free of charge";
  const auto ids = tok.encode(text, false);
  sampling_params p;
  p.max_tokens = static_cast<std::int32_t>(ids.size());
  const auto r = feed(tok, p, ids);
  CHECK(r.text == text);
  CHECK(r.reason == finish_reason::length);
  CHECK(r.tokens_fed == static_cast<int>(ids.size()));

  p.max_tokens = 2;
  const auto short_run = feed(tok, p, ids);
  CHECK(short_run.tokens_fed == 2);
  CHECK(short_run.reason == finish_reason::length);
  CHECK(short_run.text == tok.decode(std::vector<token_id>(ids.begin(), ids.begin() + 2)));
}

TEST_CASE("a stop string ends the output before it, never shown") {
  const auto& tok = testing::test_tokenizer();
  const std::string text = "the Software without restriction, including without limitation";
  const auto ids = tok.encode(text, false);
  sampling_params p;
  p.max_tokens = 1000;
  p.stop = {"restriction", "zzz-never"};
  const auto r = feed(tok, p, ids);
  CHECK(r.reason == finish_reason::stop);
  CHECK(r.stop_reason == "restriction");
  CHECK(r.text == "the Software without ");

  // A stop string inside one token's text, and one spanning several tokens.
  p.stop = {"ware with"};
  CHECK(feed(tok, p, ids).text == "the Soft");
  p.stop = {"t"};
  CHECK(feed(tok, p, ids).text == "");
}

TEST_CASE("the earliest stop string wins, whatever the list order") {
  const auto& tok = testing::test_tokenizer();
  const auto ids = tok.encode("free of charge, to any person", false);
  sampling_params p;
  p.max_tokens = 100;
  p.stop = {"person", "charge", "of charge"};
  const auto r = feed(tok, p, ids);
  CHECK(r.text == "free ");
  CHECK(r.stop_reason == "of charge");
}

TEST_CASE("EOS and stop token ids finish with stop and add no text") {
  const auto& tok = testing::test_tokenizer();
  auto ids = tok.encode("free of charge", false);
  const auto n = ids.size();
  ids.push_back(tok.eos_id());
  ids.push_back(tok.encode("more", false).front());
  sampling_params p;
  p.max_tokens = 100;
  auto r = feed(tok, p, ids, {tok.eos_id()});
  CHECK(r.text == "free of charge");
  CHECK(r.reason == finish_reason::stop);
  CHECK(r.tokens_fed == static_cast<int>(n + 1));

  p.ignore_eos = true; // EOS is then just a (textless) token
  r = feed(tok, p, ids, {tok.eos_id()});
  CHECK(r.reason == finish_reason::none);
  CHECK(r.tokens_fed == static_cast<int>(ids.size()));

  p.ignore_eos = false;
  p.stop_token_ids = {ids[1]};
  r = feed(tok, p, ids, {tok.eos_id()});
  CHECK(r.reason == finish_reason::stop);
  CHECK(r.tokens_fed == 2);
  CHECK(r.text == tok.decode(std::vector<token_id>{ids[0]}));
}

TEST_CASE("ids beyond the tokenizer's vocabulary carry no text") {
  const auto& tok = testing::test_tokenizer();
  sampling_params p;
  p.max_tokens = 10;
  const auto r = feed(tok, p, {tok.vocab_size() + 5, tok.encode("charge", false).front()});
  CHECK(r.text.find("charge") != std::string::npos);
}

TEST_CASE("finish reasons are spelled as OpenAI does") {
  CHECK(finish_reason_name(finish_reason::stop) == "stop");
  CHECK(finish_reason_name(finish_reason::length) == "length");
  CHECK(finish_reason_name(finish_reason::abort) == "abort");
  CHECK(finish_reason_name(finish_reason::none).empty());
}
