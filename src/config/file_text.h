// Internal: reading a config file into memory.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace picomq::config::detail {

// The file's bytes, or nullopt with *error set to a sentence ("cannot open file: ...").
std::optional<std::string> read_file_text(const std::filesystem::path& file, std::string* error);

}  // namespace picomq::config::detail
