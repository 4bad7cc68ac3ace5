// The SentencePiece implementation of tokenizer (tokenizer.model).

#include "engine/tokenizer/tokenizer_impl.hpp"

#include "engine/formats/model_error.hpp"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

namespace troupe {
namespace {

// ModelProto.SentencePiece.Type, sentencepiece_model.proto.
enum class piece_type : std::uint8_t {
  normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

struct wire_field {
  std::uint32_t number = 0;
  std::uint64_t varint = 0;   // wire type 0
  std::string_view bytes;     // wire type 2
};

// Calls f on each field of a protobuf message; false when malformed. The
// installed sentencepiece has no sentencepiece_model.pb.h, and the processor
// API cannot tell user-defined pieces or the normalizer flags, so we read the
// few fields we need from the serialized model ourselves.
template <class F>
auto for_each_field(std::string_view msg, F&& f) -> bool {
  auto pos = std::size_t{0};
  auto read_varint = [&](std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && pos < msg.size(); shift += 7) {
      const auto b = static_cast<unsigned char>(msg[pos++]);
      v |= std::uint64_t{b & 0x7Fu} << shift;
      if ((b & 0x80u) == 0) return true;
    }
    return false;
  };
  while (pos < msg.size()) {
    auto key = std::uint64_t{0};
    if (!read_varint(key)) return false;
    auto field = wire_field{static_cast<std::uint32_t>(key >> 3), 0, {}};
    switch (key & 7) {
    case 0:
      if (!read_varint(field.varint)) return false;
      break;
    case 1:
      if (msg.size() - pos < 8) return false;
      pos += 8;
      break;
    case 2: {
      auto len = std::uint64_t{0};
      if (!read_varint(len) || len > msg.size() - pos) return false;
      field.bytes = msg.substr(pos, len);
      pos += len;
      break;
    }
    case 5:
      if (msg.size() - pos < 4) return false;
      pos += 4;
      break;
    default:
      return false;
    }
    f(field);
  }
  return true;
}

struct model_facts {
  std::vector<piece_type> types;
  bool add_dummy_prefix = true;         // proto defaults
  bool remove_extra_whitespaces = true;
};

auto read_model_facts(std::string_view proto, model_facts& facts) -> bool {
  auto ok = true;
  ok &= for_each_field(proto, [&](const wire_field& f) {
    if (f.number == 1) { // ModelProto.pieces
      auto type = piece_type::normal;
      ok &= for_each_field(f.bytes, [&](const wire_field& g) {
        if (g.number == 3) type = static_cast<piece_type>(g.varint);
      });
      facts.types.push_back(type);
    } else if (f.number == 3) { // ModelProto.normalizer_spec
      ok &= for_each_field(f.bytes, [&](const wire_field& g) {
        if (g.number == 3) facts.add_dummy_prefix = g.varint != 0;
        if (g.number == 4) facts.remove_extra_whitespaces = g.varint != 0;
      });
    }
  });
  return ok;
}

auto hex_value(char c) -> int {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return 0;
}

auto surface_of(std::string_view piece) -> std::string {
  constexpr auto space_symbol = std::string_view{"\xE2\x96\x81"}; // "▁"
  auto out = std::string{};
  for (auto pos = piece.find(space_symbol); pos != std::string_view::npos; pos = piece.find(space_symbol)) {
    out.append(piece.substr(0, pos)).push_back(' ');
    piece.remove_prefix(pos + space_symbol.size());
  }
  return out.append(piece);
}

class sentencepiece_tokenizer final : public tokenizer_impl {
public:
  /// `proto`: a serialized ModelProto; `source` names it in errors.
  auto load(std::string proto, const std::filesystem::path& source, const sentencepiece_options& options) -> void;

  auto encode(std::string_view text, bool add_special, bool match_special) const
      -> std::vector<token_id> override;
  auto decode(std::span<const token_id> ids) const -> std::string override;
  auto piece(token_id id) const -> std::string_view override;
  auto id_of(std::string_view piece) const -> token_id override;

private:
  auto encode_plain(std::string_view text, std::vector<token_id>& out) const -> void {
    auto ids = std::vector<int>{};
    if (text.empty() || !sp_.Encode(text, &ids).ok()) return;
    out.insert(out.end(), ids.begin(), ids.end());
  }

  sentencepiece::SentencePieceProcessor sp_;
  /// Spellings encode_with_special turns into ids, longest first.
  std::vector<std::pair<std::string, token_id>> specials_;
  std::array<bool, 256> special_first_byte_{};
  bool add_bos_ = true;
  bool add_eos_ = false;
};

auto sentencepiece_tokenizer::load(std::string bytes, const std::filesystem::path& model_file,
                                   const sentencepiece_options& options) -> void {
  // sentencepiece parses these bytes, and so does read_model_facts (piece
  // types and normalizer flags the API hides).
  if (const auto status = sp_.LoadFromSerializedProto(bytes); !status.ok())
    fail(model_file, std::string("not a sentencepiece model (") + status.message() + ")");
  auto facts = model_facts{};
  const auto num_pieces = sp_.GetPieceSize();
  if (!read_model_facts(bytes, facts) || facts.types.size() != static_cast<std::size_t>(num_pieces))
    fail(model_file, "cannot read the piece table");
  auto& t = table;
  t.leading = facts.remove_extra_whitespaces ? leading_space_rule::drop_while_empty
              : facts.add_dummy_prefix       ? leading_space_rule::drop_first
                                             : leading_space_rule::keep;
  t.bos = options.bos.value_or(sp_.bos_id());
  t.eos = options.eos.value_or(sp_.eos_id());
  add_bos_ = options.add_bos;
  add_eos_ = options.add_eos;
  t.kinds.resize(num_pieces);
  t.byte_values.resize(num_pieces);
  t.surfaces.resize(num_pieces);
  for (auto id = 0; id < num_pieces; ++id) {
    const auto& p = sp_.IdToPiece(id);
    switch (facts.types[id]) {
    case piece_type::byte:
      if (p.size() != 6 || !p.starts_with("<0x")) fail(model_file, "malformed byte piece " + p);
      t.kinds[id] = token_kind::byte;
      t.byte_values[id] = static_cast<unsigned char>(hex_value(p[3]) * 16 + hex_value(p[4]));
      t.surfaces[id].assign(1, static_cast<char>(t.byte_values[id]));
      break;
    case piece_type::control:
      t.kinds[id] = token_kind::control;
      break;
    case piece_type::unknown: {
      t.kinds[id] = token_kind::unknown;
      auto text = std::string{};
      if (sp_.Decode(std::vector<int>{id}, &text).ok()) t.surfaces[id] = text; // " ⁇ "
      break;
    }
    case piece_type::user_defined:
      t.kinds[id] = token_kind::user_defined;
      t.surfaces[id] = surface_of(p);
      break;
    default:
      t.kinds[id] = token_kind::normal;
      t.surfaces[id] = surface_of(p);
    }
    if (facts.types[id] == piece_type::control || facts.types[id] == piece_type::user_defined) {
      specials_.emplace_back(p, id);
      special_first_byte_[static_cast<unsigned char>(p[0])] = true;
    }
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

auto sentencepiece_tokenizer::encode(std::string_view text, bool add_special, bool match_special) const
    -> std::vector<token_id> {
  auto out = std::vector<token_id>{};
  if (add_special && add_bos_ && table.bos >= 0) out.push_back(table.bos);
  // Each stretch between special spellings is encoded on its own, dummy
  // prefix included, as Meta's Llama-2 chat code and HF's legacy mode do.
  auto segment_begin = std::size_t{0};
  auto pos = std::size_t{0};
  while (match_special && pos < text.size()) {
    auto matched = false;
    if (special_first_byte_[static_cast<unsigned char>(text[pos])]) {
      for (const auto& [spelling, id] : specials_) {
        if (text.substr(pos).starts_with(spelling)) {
          encode_plain(text.substr(segment_begin, pos - segment_begin), out);
          out.push_back(id);
          pos += spelling.size();
          segment_begin = pos;
          matched = true;
          break;
        }
      }
    }
    if (!matched) ++pos;
  }
  encode_plain(text.substr(segment_begin), out);
  if (add_special && add_eos_ && table.eos >= 0) out.push_back(table.eos);
  return out;
}

auto sentencepiece_tokenizer::decode(std::span<const token_id> ids) const -> std::string {
  auto valid = std::vector<int>{};
  valid.reserve(ids.size());
  for (const auto id : ids)
    if (table.in_range(id)) valid.push_back(id);
  auto text = std::string{};
  if (!sp_.Decode(valid, &text).ok()) return {};
  return text;
}

auto sentencepiece_tokenizer::piece(token_id id) const -> std::string_view {
  if (!table.in_range(id)) return {};
  return sp_.IdToPiece(id); // a reference into the loaded model
}

auto sentencepiece_tokenizer::id_of(std::string_view piece) const -> token_id {
  // PieceToId answers unk_id for absent pieces.
  const auto id = sp_.PieceToId(piece);
  if (!table.in_range(id) || sp_.IdToPiece(id) != piece) return -1;
  return id;
}

} // namespace

auto load_sentencepiece(const std::filesystem::path& model_file) -> std::unique_ptr<tokenizer_impl> {
  auto ec = std::error_code{};
  if (!std::filesystem::is_regular_file(model_file, ec)) fail(model_file, "no such file");
  auto bytes = std::string{};
  {
    auto in = std::ifstream(model_file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) fail(model_file, "cannot read");
  }
  return load_sentencepiece_proto(std::move(bytes), model_file, {});
}

auto load_sentencepiece_proto(std::string proto, const std::filesystem::path& source,
                              const sentencepiece_options& options) -> std::unique_ptr<tokenizer_impl> {
  auto tok = std::make_unique<sentencepiece_tokenizer>();
  tok->load(std::move(proto), source, options);
  return tok;
}

} // namespace troupe
