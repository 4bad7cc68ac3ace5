#include "engine/formats/mapping.hpp"

#include "engine/formats/model_error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace troupe {
namespace {

/// Closes a file descriptor on every path out of map_read_only.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

} // namespace

auto map_read_only(const std::filesystem::path& path) -> read_only_map {
  const fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  read_only_map m;
  m.size = static_cast<std::size_t>(st.st_size);
  if (m.size == 0) return m; // (mmap refuses a length of 0)
  m.data = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (m.data == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(errno));
  return m;
}

} // namespace troupe
