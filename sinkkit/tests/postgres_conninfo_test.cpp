// Checks of the connection string that need no server (picomq/kit/postgres/conninfo.hpp).
#include <gtest/gtest.h>

#include "picomq/kit/postgres/conninfo.hpp"

namespace picomq::kit::pg {
namespace {

std::string problem(const ConnOptions& options) { return check_connection_options(options).value_or("(none)"); }

TEST(PostgresConnInfo, ANonNumericPortIsRefusedNamingTheOption) {
  EXPECT_EQ(problem({{"host", "127.0.0.1"}, {"port", "notaport"}, {"password", "s3cret"}}),
            R"(option "port": "notaport" is not a port number (an integer from 1 to 65535))");
  EXPECT_EQ(problem({{"port", "99999"}}), R"(option "port": "99999" is outside 1-65535)");
  EXPECT_EQ(problem({{"port", "0"}}), R"(option "port": "0" is outside 1-65535)");
  EXPECT_EQ(problem({{"host", "a,b"}, {"port", "5432,x"}}),
            R"(option "port": "x" is not a port number (an integer from 1 to 65535))");
  EXPECT_EQ(problem({{"host", "a"}, {"port", "5432,5433"}}),
            R"(option "port": 2 ports for 1 hosts (give one port, or one per host))");
}

TEST(PostgresConnInfo, ValidPortsAndIntegersPassAsLibpqParsesThem) {
  EXPECT_FALSE(check_connection_options({}));
  EXPECT_FALSE(check_connection_options({{"host", "db"}, {"port", "5432"}, {"dbname", "x"}}));
  EXPECT_FALSE(check_connection_options({{"port", " 5432 "}})) << "libpq allows blanks around integers";
  EXPECT_FALSE(check_connection_options({{"port", ""}})) << "empty: the default port";
  EXPECT_FALSE(check_connection_options({{"host", "a,b"}, {"port", "5432,"}}));
  EXPECT_FALSE(check_connection_options({{"host", "a,b,c"}, {"port", "5432"}})) << "one port for all hosts";
  EXPECT_FALSE(check_connection_options({{"hostaddr", "1.2.3.4,1.2.3.5"}, {"port", "1,2"}}));
  EXPECT_FALSE(check_connection_options({{"connect_timeout", "10"}, {"keepalives", "1"}, {"tcp_user_timeout", "-1"}}));
}

TEST(PostgresConnInfo, OtherIntegerOptionsAreChecked) {
  EXPECT_EQ(problem({{"connect_timeout", "10s"}}), R"(option "connect_timeout": "10s" is not an integer)");
  EXPECT_EQ(problem({{"keepalives_idle", "x"}}), R"(option "keepalives_idle": "x" is not an integer)");
  EXPECT_EQ(problem({{"keepalives_count", "99999999999"}}),
            R"(option "keepalives_count": "99999999999" is not an integer)");
}

TEST(PostgresConnInfo, AValueHoldingThePasswordIsNotQuoted) {
  // postgres://u@host:s3cret/db (a ':' typed for '@'): the "port" is the password.
  EXPECT_EQ(problem({{"user", "u"}, {"port", "s3cret"}, {"password", "s3cret"}}),
            R"(option "port": (hidden: it holds the password) is not a port number (an integer from 1 to 65535))");
}

TEST(PostgresConnInfo, LibpqOptionErrorsAreToldFromUnreachableServers) {
  // Some messages are one literal over two lines.
  // NOLINTBEGIN(bugprone-suspicious-missing-comma)
  for (
      const char* bad :
      {R"(invalid integer value "notaport" for connection option "port")", R"(invalid port number: "99999")",
       R"(invalid sslmode value: "bogus")", R"(invalid target_session_attrs value: "x")",
       R"(invalid connection option "foo")", R"(invalid URI query parameter: "foo")",
       "could not match 2 port numbers to 1 hosts",
       R"(could not parse network address "notanip": Name or service not known)",
       R"(connection to server at "127.0.0.1", port 5432 failed: invalid integer value "x" for connection option "keepalives")",
       "connection to server at \"a\" (1.2.3.4), port 5432 failed: Connection refused\n"
       "invalid port number: \"0\""})
    EXPECT_TRUE(is_connection_option_error(bad)) << bad;
  for (const char* transient :
       {"connection to server at \"127.0.0.1\", port 1 failed: Connection refused\n\tIs the server running on that "
        "host and accepting TCP/IP connections?",
        R"(could not translate host name "db.internal" to address: Temporary failure in name resolution)",
        R"(connection to server on socket "/tmp/.s.PGSQL.5432" failed: No such file or directory)",
        "connection to server at \"h\", port 5432 failed: FATAL:  the database system is starting up", "out of memory"})
    EXPECT_FALSE(is_connection_option_error(transient)) << transient;
  // NOLINTEND(bugprone-suspicious-missing-comma)
}

TEST(PostgresConnInfo, SecretsAreRedactedFromMessages) {
  EXPECT_EQ(redact_secrets(R"(invalid percent-encoded token: "p%zzs3cretpw")", "postgres://u:p%zzs3cretpw@h/db"),
            R"(invalid percent-encoded token: "********")");
  EXPECT_EQ(redact_secrets("bad s3cret here", "host=h password=s3cret port=x"), "bad ******** here");
  EXPECT_EQ(redact_secrets("bad 'quoted pw' here", "host=h password='quoted pw'"), "bad '********' here");
  EXPECT_EQ(redact_secrets("pw p%40ss and p@ss", "postgresql://user:p%40ss@h:5432/db"), "pw ******** and ********");
  const ConnOptions parsed{{"password", "xy"}};
  EXPECT_EQ(redact_secrets(R"(value "xy" for option "port")", "", &parsed), R"(value "********" for option "port")")
      << "a short password only where libpq quotes it";
  EXPECT_EQ(redact_secrets("proxy", "", &parsed), "proxy");
  EXPECT_EQ(redact_secrets("no secrets", "host=h port=5432"), "no secrets");
}

}  // namespace
}  // namespace picomq::kit::pg
