#include "postgres.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "harness.h"
#include "picomq/kit/testing/shared_server.hpp"

namespace picomq::test {

namespace {
std::string quote_value(const std::string& v) {  // a libpq conninfo value
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::string shorten(const std::string& sql) { return sql.size() > 200 ? sql.substr(0, 200) + "..." : sql; }

using Conn = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

Conn connect(const std::string& conninfo, const std::string& database) {
  Conn conn(PQconnectdb(conninfo.c_str()), &PQfinish);
  if (!conn) throw std::runtime_error("postgres: out of memory connecting");
  if (PQstatus(conn.get()) != CONNECTION_OK)
    throw std::runtime_error("postgres: cannot connect to database " + database + ": " +
                             trim(PQerrorMessage(conn.get())));
  return conn;
}

// Runs sql (one or more statements); the last statement's result, or throws with the server's message.
Result run(const Postgres& pg, const std::string& sql, const std::string& database) {
  Conn conn = connect(pg.conninfo(database), database);
  Result res(PQexec(conn.get(), sql.c_str()), &PQclear);
  const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
    std::string msg = res ? trim(PQresultErrorMessage(res.get())) : "";
    if (msg.empty()) msg = trim(PQerrorMessage(conn.get()));
    throw std::runtime_error("postgres: " + msg + " [database " + database + ", sql: " + shorten(sql) + "]");
  }
  return res;
}

void run_script(const std::string& args, const std::string& what) {
  const std::string cmd = std::string(PICOMQ_POSTGRES_SH) + " " + args;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("could not " + what + " PostgreSQL: " + cmd);
}
}  // namespace

Postgres& Postgres::shared() {
  return kit::testing::SharedServer<Postgres>::get(
      "picomq-pg", [](const std::filesystem::path& dir) { return std::make_unique<Postgres>(dir, free_port()); });
}

void Postgres::stop_shared() { kit::testing::SharedServer<Postgres>::stop(); }

void Postgres::start() {
  // Our pid: the script's watchdog stops the server should this process die without stop().
  run_script("start " + dir_.string() + " " + std::to_string(port_) + " " + std::to_string(getpid()), "start");
}

void Postgres::stop() { (void)std::system((std::string(PICOMQ_POSTGRES_SH) + " stop " + dir_.string()).c_str()); }

std::string Postgres::conninfo(const std::string& database) const {
  return "host=" + host() + " port=" + std::to_string(port_) + " user=postgres dbname=" + quote_value(database) +
         " connect_timeout=10 client_encoding=UTF8";
}

void Postgres::exec(const std::string& sql, const std::string& database) const { run(*this, sql, database); }

std::vector<Postgres::Row> Postgres::query(const std::string& sql, const std::string& database) const {
  Result res = run(*this, sql, database);
  std::vector<Row> rows;
  const int n = PQntuples(res.get()), cols = PQnfields(res.get());
  rows.reserve(n);
  for (int r = 0; r < n; ++r) {
    Row row;
    row.reserve(cols);
    for (int c = 0; c < cols; ++c) {
      if (PQgetisnull(res.get(), r, c)) row.emplace_back(std::nullopt);
      else row.emplace_back(std::string(PQgetvalue(res.get(), r, c), PQgetlength(res.get(), r, c)));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string Postgres::create_database(const std::string& prefix) const {
  static std::atomic<int> counter{0};
  auto clean = [](std::string s) {
    for (auto& c : s)
      c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) : '_';
    return s;
  };
  std::string test = "t";
  if (auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) test = info->name();
  const std::string suffix = "_" + std::to_string(getpid()) + "_" + std::to_string(++counter);
  std::string name = clean(prefix) + "_" + clean(test);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "d" + name;
  name = name.substr(0, 63 - suffix.size()) + suffix;
  exec("CREATE DATABASE " + name);
  return name;
}

std::string postgres_definition(const std::string& key, const std::string& topics, const std::string& database,
                                const std::string& block_lines, const std::string& plugin_config,
                                const std::string& conninfo) {
  std::string text = "type = \"sink\"\nkey = \"" + key + "\"\npath = \"libpicomq_connector_postgres_sink\"\n";
  text += "[[topics]]\ntopics = [" + topics + "]\n" + block_lines + "\n[plugin_config]\n";
  text += "connection_string = \"" + (conninfo.empty() ? Postgres::shared().conninfo(database) : conninfo) + "\"\n";
  return text + plugin_config + "\n";
}

}  // namespace picomq::test
