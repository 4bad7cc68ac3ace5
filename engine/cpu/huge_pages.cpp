#include "engine/cpu/huge_pages.hpp"

#include <cstring>
#include <memory>
#include <new>
#include <sys/mman.h>
#include <vector>

namespace troupe {
namespace {

constexpr std::size_t k_huge_page = std::size_t{2} << 20;

auto bytes_of(const weight_tensor& t) -> std::size_t {
  return static_cast<std::size_t>(t.numel()) * dtype_size(t.type);
}

// Every tensor of the model once (the head may be the embedding).
auto tensors_of(model_weights& w) -> std::vector<weight_tensor*> {
  std::vector<weight_tensor*> all{&w.embed, &w.final_norm};
  for (auto& l : w.layers)
    for (auto* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.mlp_norm, &l.w_gate, &l.w_up, &l.w_down})
      all.push_back(t);
  if (w.lm_head.data != w.embed.data) all.push_back(&w.lm_head);
  return all;
}

} // namespace

void place_in_huge_pages(model_weights& w) {
  const auto all = tensors_of(w);
  std::size_t total = 0;
  for (const auto* t : all) total += (bytes_of(*t) + 63) / 64 * 64;
  const std::size_t size = (total + k_huge_page - 1) / k_huge_page * k_huge_page;
  // Over-allocate by one huge page so the region can start on a 2 MiB boundary.
  void* raw = ::mmap(nullptr, size + k_huge_page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto* base = reinterpret_cast<std::byte*>(
      (reinterpret_cast<std::uintptr_t>(raw) + k_huge_page - 1) & ~(k_huge_page - 1));
  ::madvise(base, size, MADV_HUGEPAGE);

  const void* old_embed = w.embed.data;
  std::size_t offset = 0;
  for (auto* t : all) {
    std::memcpy(base + offset, t->data, bytes_of(*t));
    t->data = base + offset;
    offset += (bytes_of(*t) + 63) / 64 * 64;
  }
  if (w.lm_head.data == old_embed) w.lm_head.data = w.embed.data;

  // The copies replace the file mappings (and the converted norm vectors).
  const std::size_t mapped = size + k_huge_page;
  w.storage.clear();
  w.storage.push_back(std::shared_ptr<const void>(raw, [mapped](const void* p) {
    ::munmap(const_cast<void*>(p), mapped);
  }));
}

} // namespace troupe
