#pragma once
// A libpq connection string, parsed and checked before any server is contacted (docs/sinks/postgres.md,
// "Connection string"): the PostgreSQL and Redshift sinks' connection_string. libpq's
// PQconninfoParse only knows the syntax and the option names; libpq checks most option values (a
// port that is not a number, an unknown sslmode) only when it connects, and reports them then as
// a failed connection, at once and with no server contacted. Those are configuration errors: a
// sink refuses them when it opens, and a connection failure carrying one is permanent, not a
// server that is down. In the kit's libpq library (picomq_sinkkit_postgres).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/kit/result.hpp"

namespace picomq::kit::pg {

// The options PQconninfoParse found (keyword, value), unset ones left out.
using ConnOptions = std::vector<std::pair<std::string, std::string>>;

// The first problem with the values of `options` that libpq would only report when it connects,
// as "option \"port\": ..." naming the option and the problem; nullopt when there is none.
// Checked: the integer options (port, each of a comma-separated list, 1-65535; connect_timeout,
// keepalives, keepalives_idle, keepalives_interval, keepalives_count, tcp_user_timeout) as
// libpq parses them (base 10, surrounding blanks allowed), and that there is one port or one
// per host. A value equal to the password is never quoted.
std::optional<std::string> check_connection_options(const ConnOptions& options);

// The options of a connection string (key=value or a postgresql:// URI) as libpq's
// PQconninfoParse reads them, each value checked (check_connection_options); the problem, secrets
// redacted, as "is not a valid libpq connection string: ..." otherwise.
Result<ConnOptions> parse_connection_string(const std::string& text);

// True when a libpq connection failure message reports a bad option value (libpq's own checks:
// "invalid integer value ... for connection option", "invalid port number", "invalid sslmode
// value", "could not match 2 port numbers to 1 hosts", ...), which no retry can mend, as
// opposed to a server that cannot be reached or refused the connection.
bool is_connection_option_error(std::string_view libpq_message);

// `message` with every secret of `connection_string` (the password, whether given as
// password=... or in a URI's user:password@) replaced by ********; `options`, when the string
// parsed, adds the parsed password.
std::string redact_secrets(std::string message, std::string_view connection_string,
                           const ConnOptions* options = nullptr);

}  // namespace picomq::kit::pg
