#include "config/file_text.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace picomq::config::detail {

std::optional<std::string> read_file_text(const std::filesystem::path& file, std::string* error) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    if (error) *error = "cannot read file: it is a directory";
    return std::nullopt;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (error) *error = std::string("cannot open file: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    if (error) *error = "cannot read file";
    return std::nullopt;
  }
  return std::move(text).str();
}

}  // namespace picomq::config::detail
