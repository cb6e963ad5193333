#include "redshift/staging_text.h"

namespace picomq::redshift {

void csv_field(std::string& out, std::string_view v) {
  out += '"';
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string sql_literal(std::string_view v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string last_part(const std::string& table) {
  const size_t dot = table.rfind('.');
  return dot == std::string::npos ? table : table.substr(dot + 1);
}

}  // namespace picomq::redshift
