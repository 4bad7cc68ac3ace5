// libFuzzer harness: the GGUF reader (header, metadata of every value type,
// nested arrays, tensor infos, alignment, offsets) on any bytes, as a file
// (an in-memory one: memfd). Every tensor's bytes are read once, so a
// pointer past the mapping is caught by ASan or a fault.

#include "engine/model/gguf.hpp"
#include "engine/model/model_error.hpp"

#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int fd = memfd_create("fuzz.gguf", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  try {
    const auto f = troupe::gguf::file::open("/proc/self/fd/" + std::to_string(fd));
    unsigned sum = 0;
    for (const auto& t : f->tensors()) {
      if (f->find_tensor(t.name) != &t) __builtin_trap();
      if (t.num_bytes > 0) sum += static_cast<unsigned>(t.data[0]) + static_cast<unsigned>(t.data[t.num_bytes - 1]);
    }
    for (const auto& [k, v] : f->metadata()) sum += static_cast<unsigned>(troupe::gguf::describe(v).size() + k.size());
    (void)sum;
  } catch (const troupe::model_error&) {
  }
  return 0;
}
