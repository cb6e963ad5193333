// Configuration errors: one record per problem, each pointing at a file position and a
// dotted key, so a user can fix every mistake of a file in one pass.
#pragma once

#include <string>
#include <vector>

namespace picomq::config {

struct ConfigError {
  std::string file;
  int line = 0;     // 1-based; 0 when the error is about the whole file (unreadable, missing)
  int column = 0;   // 1-based; 0 when unknown
  std::string key;  // dotted key, e.g. "topics[0].poll_interval"; empty for syntax errors
  std::string message;

  // "file:line:column: key 'topics[0].poll_interval': message"
  // The "line:column" part is left out when line is 0, the "key '...'" part when key is empty.
  std::string to_string() const;
};

// One error per line, each formatted with ConfigError::to_string().
std::string format_errors(const std::vector<ConfigError>& errors);

}  // namespace picomq::config
