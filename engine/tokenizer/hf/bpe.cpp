#include "engine/tokenizer/hf/bpe.hpp"

#include "engine/tokenizer/hf/unicode.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>

namespace troupe::hf {
namespace {

constexpr auto k_cache_words_per_shard = std::size_t{4096};
constexpr auto k_cache_max_word_bytes = std::size_t{256};

auto mix(std::uint64_t key) -> std::uint64_t {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return key;
}

auto utf8_length(unsigned char lead) -> std::size_t { return std::max<std::size_t>(1, utf8_sequence_length(lead)); }

} // namespace

bpe::~bpe() = default;

auto parse_bpe_spec(dom::element model) -> bpe_spec {
  auto spec = bpe_spec{};
  if (auto d = field(model, "dropout"); d && !d->is_null()) {
    auto p = 0.0;
    if (d->get_double().get(p) == simdjson::SUCCESS && p > 0.0) throw hf_error("model BPE dropout is not supported");
  }
  spec.byte_fallback = bool_field(model, "byte_fallback", false);
  spec.fuse_unk = bool_field(model, "fuse_unk", false);
  spec.ignore_merges = bool_field(model, "ignore_merges", false);
  if (const auto p = opt_string(model, "continuing_subword_prefix")) spec.continuing_subword_prefix = std::string(*p);
  if (const auto s = opt_string(model, "end_of_word_suffix")) spec.end_of_word_suffix = std::string(*s);
  if (const auto u = opt_string(model, "unk_token")) spec.unk_token = std::string(*u);

  auto vocab = dom::object{};
  if (model["vocab"].get_object().get(vocab) != simdjson::SUCCESS) throw hf_error("model has no \"vocab\" object");
  spec.vocab.reserve(vocab.size());
  for (const auto [key, value] : vocab) {
    auto id = std::int64_t{0};
    if (value.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 30))
      throw hf_error("model vocab: \"" + std::string(key) + "\" has no valid id");
    spec.vocab.emplace_back(std::string(key), static_cast<token_id>(id));
  }

  auto merges = dom::array{};
  if (model["merges"].get_array().get(merges) != simdjson::SUCCESS) throw hf_error("model has no \"merges\" list");
  spec.merges.reserve(merges.size());
  for (const auto m : merges) {
    auto text = std::string_view{};
    auto pair = dom::array{};
    if (m.get_string().get(text) == simdjson::SUCCESS) {
      const auto space = text.find(' ');
      if (space == std::string_view::npos || text.find(' ', space + 1) != std::string_view::npos)
        throw hf_error("model merges: \"" + std::string(text) + "\" is not two tokens");
      spec.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (m.get_array().get(pair) == simdjson::SUCCESS && pair.size() == 2) {
      spec.merges.emplace_back(as_string(pair.at(0).value_unsafe(), "a merge"),
                               as_string(pair.at(1).value_unsafe(), "a merge"));
    } else {
      throw hf_error("model merges: an entry is neither \"a b\" nor [a, b]");
    }
  }
  return spec;
}

bpe::bpe(bpe_spec spec, bool byte_level) : byte_level_(byte_level) {
  byte_ids_.fill(-1);
  fallback_ids_.fill(-1);
  byte_fallback_ = spec.byte_fallback;
  fuse_unk_ = spec.fuse_unk;
  ignore_merges_ = spec.ignore_merges;
  const auto& alphabet = gpt2_alphabet();
  auto internal = [&](std::string_view s, std::string& out) -> bool {
    if (!byte_level_) {
      out.assign(s);
      return true;
    }
    return alphabet.to_bytes(s, out);
  };
  auto converted = std::string{};
  if (spec.continuing_subword_prefix && !internal(*spec.continuing_subword_prefix, prefix_))
    throw hf_error("model BPE continuing_subword_prefix is outside the byte-level alphabet");
  if (spec.end_of_word_suffix && !internal(*spec.end_of_word_suffix, suffix_))
    throw hf_error("model BPE end_of_word_suffix is outside the byte-level alphabet");

  file_vocab_ = std::move(spec.vocab);
  vocab_.reserve(file_vocab_.size());
  for (const auto& [key, id] : file_vocab_)
    if (internal(key, converted)) vocab_.emplace(converted, id);
  if (byte_level_)
    for (auto b = 0; b < 256; ++b) byte_ids_[b] = lookup(std::string(1, static_cast<char>(b)));
  if (byte_fallback_) {
    for (auto b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      fallback_ids_[b] = lookup(name);
    }
  }
  if (spec.unk_token) {
    for (const auto& [k, id] : file_vocab_)
      if (k == *spec.unk_token) unk_id_ = id;
    if (unk_id_ < 0) throw hf_error("model unk_token \"" + *spec.unk_token + "\" is not in the vocabulary");
  }

  const auto capacity = std::bit_ceil(std::max<std::size_t>(16, spec.merges.size() * 2));
  merges_.assign(capacity, merge_slot{});
  merge_mask_ = capacity - 1;
  auto rank = std::uint32_t{0};
  auto a = std::string{}, b = std::string{};
  for (const auto& [left, right] : spec.merges) {
    if (!internal(left, a) || !internal(right, b))
      throw hf_error("model merges: \"" + left + " " + right + "\" is outside the byte-level alphabet");
    const auto a_id = lookup(a), b_id = lookup(b);
    if (a_id < 0 || b_id < 0)
      throw hf_error("model merges: \"" + left + " " + right + "\" names a token not in the vocabulary");
    const auto merged_text = a + b.substr(std::min(prefix_.size(), b.size()));
    const auto merged = lookup(merged_text);
    if (merged < 0)
      throw hf_error("model merges: the merge of \"" + left + " " + right + "\" is not in the vocabulary");
    const auto key = std::uint64_t{static_cast<std::uint32_t>(a_id)} << 32 | static_cast<std::uint32_t>(b_id);
    auto slot = mix(key) & merge_mask_;
    while (merges_[slot].key != ~std::uint64_t{0} && merges_[slot].key != key) slot = (slot + 1) & merge_mask_;
    merges_[slot] = {key, rank++, merged}; // a repeated pair: the later one, as HF's map keeps
  }
}

auto bpe::lookup(std::string_view key) const -> token_id {
  const auto it = vocab_.find(key);
  return it == vocab_.end() ? -1 : it->second;
}

auto bpe::find_merge(token_id a, token_id b, std::uint32_t& rank, token_id& merged) const -> bool {
  const auto key = std::uint64_t{static_cast<std::uint32_t>(a)} << 32 | static_cast<std::uint32_t>(b);
  for (auto slot = mix(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const auto& s = merges_[slot];
    if (s.key == key) {
      rank = s.rank;
      merged = s.merged;
      return true;
    }
    if (s.key == ~std::uint64_t{0}) return false;
  }
}

auto bpe::tokenize(std::string_view word, std::vector<token_id>& out) const -> void {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto id = lookup(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() >= k_cache_max_word_bytes) {
    merge_word(word, out);
    return;
  }
  auto& shard = cache_[std::hash<std::string_view>{}(word) % cache_.size()];
  {
    const auto lock = std::lock_guard{shard.mutex};
    if (const auto it = shard.words.find(word); it != shard.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const auto first = out.size();
  merge_word(word, out);
  const auto lock = std::lock_guard{shard.mutex};
  if (shard.words.size() < k_cache_words_per_shard)
    shard.words.emplace(std::string(word), std::vector<token_id>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
}

auto bpe::merge_word(std::string_view word, std::vector<token_id>& out) const -> void {
  thread_local std::vector<token_id> ids;
  thread_local std::string key;
  ids.clear();
  // HF's merge_word: one symbol per character (per byte when byte-level),
  // with the prefix on all but the first and the suffix on the last; an
  // unknown character becomes its <0xNN> bytes, else the unk token (runs of
  // them fused into one with fuse_unk), else it is dropped (HF fails).
  auto unk_pending = false;
  const auto plain = prefix_.empty() && suffix_.empty();
  for (auto at = std::size_t{0}; at < word.size();) {
    const auto n = byte_level_ ? 1 : std::min(utf8_length(static_cast<unsigned char>(word[at])), word.size() - at);
    const auto unit = word.substr(at, n);
    const auto is_first = at == 0, is_last = at + n == word.size();
    at += n;
    auto id = token_id{-1};
    if (plain && byte_level_) {
      id = byte_ids_[static_cast<unsigned char>(unit[0])];
    } else if (plain) {
      id = lookup(unit);
    } else {
      key.clear();
      if (!is_first) key += prefix_;
      key += unit;
      if (is_last) key += suffix_;
      id = lookup(key);
    }
    if (id >= 0) {
      if (unk_pending) ids.push_back(unk_id_);
      unk_pending = false;
      ids.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      // The bytes of the unit as looked up (prefix and suffix included).
      const auto bytes = plain ? unit : std::string_view{key};
      auto all = std::all_of(bytes.begin(), bytes.end(),
                             [&](char c) { return fallback_ids_[static_cast<unsigned char>(c)] >= 0; });
      if (all) {
        if (unk_pending) ids.push_back(unk_id_);
        unk_pending = false;
        for (const char c : bytes) ids.push_back(fallback_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_ < 0) continue;
    if (unk_pending && !fuse_unk_) ids.push_back(unk_id_);
    unk_pending = true;
  }
  if (unk_pending) ids.push_back(unk_id_);
  merge_all(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

auto bpe::merge_all(std::vector<token_id>& ids) const -> void {
  if (ids.size() < 2) return;
  struct symbol {
    token_id id;
    std::int32_t prev, next;
    bool live;
  };
  struct candidate {
    std::uint32_t rank;
    std::int32_t pos;
    token_id merged;
  };
  // A min-heap on (rank, pos): std's heap is a max-heap, so invert.
  const auto later = [](const candidate& x, const candidate& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  thread_local std::vector<symbol> sym;
  thread_local std::vector<candidate> heap;
  const auto n = static_cast<std::int32_t>(ids.size());
  sym.resize(ids.size());
  heap.clear();
  for (std::int32_t i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  auto rank = std::uint32_t{0};
  auto merged = token_id{0};
  for (std::int32_t i = 0; i + 1 < n; ++i)
    if (find_merge(sym[i].id, sym[i + 1].id, rank, merged)) heap.push_back({rank, i, merged});
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const auto top = heap.back();
    heap.pop_back();
    auto& s = sym[top.pos];
    if (!s.live || s.next < 0) continue;
    const auto right = s.next;
    // A stale entry: the pair changed since it was queued.
    if (!find_merge(s.id, sym[right].id, rank, merged) || merged != top.merged) continue;
    s.id = top.merged;
    sym[right].live = false;
    s.next = sym[right].next;
    if (s.next >= 0) sym[s.next].prev = top.pos;
    if (s.prev >= 0 && find_merge(sym[s.prev].id, s.id, rank, merged)) {
      heap.push_back({rank, s.prev, merged});
      std::push_heap(heap.begin(), heap.end(), later);
    }
    if (s.next >= 0 && find_merge(s.id, sym[s.next].id, rank, merged)) {
      heap.push_back({rank, top.pos, merged});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  ids.clear();
  for (std::int32_t i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
}

} // namespace troupe::hf
