#include "picomq/kit/postgres/conninfo.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>

namespace picomq::kit::pg {

namespace {

const std::string* find(const ConnOptions& options, std::string_view keyword) {
  for (const auto& [k, v] : options)
    if (k == keyword) return &v;
  return nullptr;
}

std::vector<std::string> split_commas(const std::string& value) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = value.find(',', start);
    out.push_back(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// libpq's parse_int_param: strtol base 10, blanks before and after allowed, nothing else, int range.
std::optional<int> parse_libpq_int(const std::string& text) {
  const char* p = text.c_str();
  while (*p && std::isspace(static_cast<unsigned char>(*p))) ++p;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(p, &end, 10);
  if (end == p || errno != 0 || v < INT_MIN || v > INT_MAX) return std::nullopt;
  while (*end && std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end) return std::nullopt;
  return static_cast<int>(v);
}

std::string shown(const std::string& value, const ConnOptions& options) {
  const std::string* password = find(options, "password");
  if (password && !password->empty() && value.find(*password) != std::string::npos)
    return "(hidden: it holds the password)";
  return "\"" + value + "\"";
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> check_connection_options(const ConnOptions& options) {
  for (std::string_view keyword : {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                                   "keepalives_count", "tcp_user_timeout"}) {
    const std::string* value = find(options, keyword);
    if (!value || trim_blanks(*value).empty()) continue;  // unset or empty: libpq's default
    if (!parse_libpq_int(*value))
      return "option \"" + std::string(keyword) + "\": " + shown(*value, options) + " is not an integer";
  }
  const std::string* port = find(options, "port");
  if (port && !port->empty()) {
    const auto ports = split_commas(*port);
    for (const auto& p : ports) {
      if (p.empty()) continue;  // an empty item is the default port
      const auto n = parse_libpq_int(p);
      if (!n) return "option \"port\": " + shown(p, options) + " is not a port number (an integer from 1 to 65535)";
      if (*n < 1 || *n > 65535) return "option \"port\": " + shown(p, options) + " is outside 1-65535";
    }
    // libpq: one port for all hosts, or one per host (host, else hostaddr).
    const std::string* host = find(options, "host");
    const std::string* hostaddr = find(options, "hostaddr");
    const std::string* hosts = host && !host->empty() ? host : (hostaddr && !hostaddr->empty() ? hostaddr : nullptr);
    const std::size_t host_count = hosts ? split_commas(*hosts).size() : 1;
    if (ports.size() > 1 && ports.size() != host_count)
      return "option \"port\": " + std::to_string(ports.size()) + " ports for " + std::to_string(host_count) +
             " hosts (give one port, or one per host)";
  }
  return std::nullopt;
}

bool is_connection_option_error(std::string_view message) {
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string_view::npos) end = message.size();
    std::string_view line = message.substr(start, end - start);
    start = end + 1;
    // A host's attempt is prefixed: 'connection to server at "h" (addr), port 5432 failed: ...'.
    if (line.starts_with("connection to server "))
      if (const auto colon = line.find("failed: "); colon != std::string_view::npos) line.remove_prefix(colon + 8);
    line = trim_blanks(line);
    if (line.find("for connection option \"") != std::string_view::npos) return true;  // invalid integer value
    if (line.starts_with("invalid ") && line.find(" value") != std::string_view::npos) return true;  // sslmode, ...
    if (line.starts_with("invalid port number")) return true;
    if (line.starts_with("invalid connection option") || line.starts_with("invalid URI")) return true;
    if (line.starts_with("could not match ")) return true;                   // ports or hostaddrs to hosts
    if (line.starts_with("could not parse network address")) return true;    // hostaddr
    if (line.find(" invalid when ") != std::string_view::npos) return true;  // sslmode=require without SSL
  }
  return false;
}

std::string redact_secrets(std::string message, std::string_view conninfo, const ConnOptions* options) {
  std::vector<std::string> secrets;
  if (options)
    if (const std::string* password = find(*options, "password"); password && !password->empty())
      secrets.push_back(*password);
  // The raw text too (the string may not have parsed): password=... and scheme://user:password@.
  for (std::size_t at = conninfo.find("password"); at != std::string_view::npos;
       at = conninfo.find("password", at + 1)) {
    std::size_t p = at + 8;
    while (p < conninfo.size() && conninfo[p] == ' ') ++p;
    if (p >= conninfo.size() || conninfo[p] != '=') continue;
    ++p;
    while (p < conninfo.size() && conninfo[p] == ' ') ++p;
    std::size_t e = p;
    if (p < conninfo.size() && conninfo[p] == '\'') {
      e = conninfo.find('\'', p + 1);
      secrets.emplace_back(conninfo.substr(p + 1, (e == std::string_view::npos ? conninfo.size() : e) - p - 1));
    } else {
      while (e < conninfo.size() && conninfo[e] != ' ' && conninfo[e] != '&') ++e;
      secrets.emplace_back(conninfo.substr(p, e - p));
      secrets.push_back(percent_decoded(secrets.back()));
    }
  }
  if (const auto scheme = conninfo.find("://"); scheme != std::string_view::npos) {
    const std::string_view rest = conninfo.substr(scheme + 3);
    const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
      const std::string_view userinfo = authority.substr(0, at);
      if (const auto colon = userinfo.find(':'); colon != std::string_view::npos) {
        secrets.emplace_back(userinfo.substr(colon + 1));
        secrets.push_back(percent_decoded(secrets.back()));
      }
    }
  }
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& s : secrets) {
    if (s.empty()) continue;
    replace_all(message, "\"" + s + "\"", "\"********\"");  // libpq quotes the values it names
    if (s.size() >= 4) replace_all(message, s, "********");
  }
  return message;
}

Result<ConnOptions> parse_connection_string(const std::string& text) {
  using R = Result<ConnOptions>;
  char* err = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(text.c_str(), &err);
  if (!parsed) {
    std::string message = err ? err : "out of memory";
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ' || message.back() == '\r'))
      message.pop_back();
    if (err) PQfreemem(err);
    return R::failure("is not a valid libpq connection string: " + redact_secrets(message, text));
  }
  ConnOptions options;
  for (const PQconninfoOption* o = parsed; o->keyword; ++o)
    if (o->val) options.emplace_back(o->keyword, o->val);
  PQconninfoFree(parsed);
  if (auto problem = check_connection_options(options)) return R::failure(redact_secrets(*problem, text, &options));
  return R::success(std::move(options));
}

}  // namespace picomq::kit::pg
