#include "engine/cpu/huge_pages.hpp"

#include "engine/cpu/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <vector>

namespace troupe {
namespace {

constexpr std::size_t k_huge_page = std::size_t{2} << 20;

// Every tensor of the model once (the head may be the embedding), but for
// quantized experts: they stay in the file's mapping, used in place (a
// mixture of experts is mostly experts, and a copy would double its memory
// until the page cache lets go of the file).
auto tensors_of(model_weights& w) -> std::vector<weight_tensor*> {
  std::vector<weight_tensor*> all{&w.embed, &w.final_norm};
  for (auto& l : w.layers) {
    auto& e = l.experts;
    for (auto* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.mlp_norm, &l.w_gate, &l.w_up, &l.w_down, &l.bq,
                    &l.bk, &l.bv, &l.bo, &l.sinks, &l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_mlp_norm,
                    &e.router, &e.router_bias, &e.gate_bias, &e.up_bias, &e.down_bias})
      if (t->data != nullptr) all.push_back(t); // a family's absent tensors stay absent
    for (auto* t : l.experts.matrices())
      if (!t->quant) all.push_back(t);
  }
  if (w.lm_head.data != w.embed.data) all.push_back(&w.lm_head);
  return all;
}

// Whether any quantized expert stays where it was (the file's mapping).
auto mapped_experts(model_weights& w) -> bool {
  for (auto& l : w.layers)
    for (const auto* t : l.experts.matrices())
      if (t->quant) return true;
  return false;
}

auto padded(std::size_t bytes) -> std::size_t { return (bytes + 63) / 64 * 64; }

} // namespace

auto map_huge_pages(std::size_t bytes) -> std::shared_ptr<std::byte> {
  const std::size_t size = (bytes + k_huge_page - 1) / k_huge_page * k_huge_page;
  // One huge page more, so the region can start on a 2 MiB boundary.
  const std::size_t mapped = size + k_huge_page;
  void* raw = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto* base = reinterpret_cast<std::byte*>(
      (reinterpret_cast<std::uintptr_t>(raw) + k_huge_page - 1) & ~(k_huge_page - 1));
  ::madvise(base, size, MADV_HUGEPAGE);
  return {base, [raw, mapped](std::byte*) { ::munmap(raw, mapped); }};
}

void place_in_huge_pages(model_weights& w) {
  const auto all = tensors_of(w);
  // Float matrices (the embedding too: the head may be it) are packed16;
  // quantized ones keep their blocks' row-major layout, the norm vectors
  // stay as they are.
  // (Not the experts' biases: rows read one at a time, by expert.)
  const auto biases = [&] {
    std::vector<const weight_tensor*> b;
    for (const auto& l : w.layers)
      for (const auto* t : {&l.experts.gate_bias, &l.experts.up_bias, &l.experts.down_bias}) b.push_back(t);
    return b;
  }();
  const auto packs = [&](const weight_tensor* t) {
    return t->rows > 1 && t->layout == weight_layout::row_major && !t->quant &&
           std::find(biases.begin(), biases.end(), t) == biases.end();
  };
  const auto bytes_after = [&](const weight_tensor* t) {
    return packs(t) ? packed16_bytes(t->type, t->rows, t->cols) : t->num_bytes();
  };
  std::size_t total = 0;
  for (const auto* t : all) total += padded(bytes_after(t));
  auto region = map_huge_pages(total);

  const void* old_embed = w.embed.data;
  std::size_t offset = 0;
  for (auto* t : all) {
    if (packs(t)) {
      pack16(t->data, t->type, t->rows, t->cols, region.get() + offset);
      t->layout = weight_layout::packed16;
    } else {
      std::memcpy(region.get() + offset, t->data, t->num_bytes());
    }
    t->data = region.get() + offset;
    offset += padded(bytes_after(t));
  }
  if (w.lm_head.data == old_embed) w.lm_head = w.embed;

  // The copies replace the file mappings (and the converted norm vectors),
  // unless quantized experts are still read from the file.
  if (!mapped_experts(w)) w.storage.clear();
  w.storage.push_back(std::move(region));
}

} // namespace troupe
