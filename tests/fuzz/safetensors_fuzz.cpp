// libFuzzer harness: the safetensors reader (header length, JSON header,
// offsets, shapes) on any bytes, as a file (an in-memory one: memfd).

#include "engine/formats/model_error.hpp"
#include "engine/formats/safetensors.hpp"

#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  try {
    const auto f = troupe::safetensors_file::open("/proc/self/fd/" + std::to_string(fd));
    for (const auto& t : f->tensors()) (void)f->find(t.name);
  } catch (const troupe::model_error&) {
  }
  return 0;
}
