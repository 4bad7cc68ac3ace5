#pragma once
// A directory under $TMPDIR that exists for one test's lifetime.

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace troupe::testing {

class temp_dir {
public:
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "troupe-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  temp_dir(const temp_dir&) = delete;
  auto operator=(const temp_dir&) -> temp_dir& = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  auto path() const -> const std::filesystem::path& { return path_; }
  auto operator/(const std::string& name) const -> std::filesystem::path { return path_ / name; }

private:
  std::filesystem::path path_;
};

} // namespace troupe::testing
