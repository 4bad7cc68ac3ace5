// libFuzzer harness: the GGUF reader (header, metadata of every value type,
// nested arrays, tensor infos, alignment, offsets) on any bytes, as a file
// (an in-memory one: memfd). Every tensor's bytes are read once, so a
// pointer past the mapping is caught by ASan or a fault. A file that opens
// then goes to what troupe makes of its metadata: the model's
// hyper-parameters and its tokenizer (any error a model_error).

#include "engine/formats/gguf.hpp"
#include "engine/model/gguf_model.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/tokenizer.hpp"

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
    try {
      (void)troupe::gguf_model_config(*f);
    } catch (const troupe::model_error&) {
    }
    const auto tok = troupe::tokenizer::load_gguf(*f);
    const auto ids = tok.encode_with_special("Hello <s> w\xc3\xb6rld\n", true);
    (void)tok.decode(ids);
  } catch (const troupe::model_error&) {
  }
  return 0;
}
