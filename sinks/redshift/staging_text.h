#pragma once
// The text the Redshift sink writes into staged CSV files and SQL statements. No I/O.
#include <string>
#include <string_view>

namespace picomq::redshift {

// One CSV field, RFC 4180 quoted (COPY CSV in PostgreSQL and Redshift read it back as is).
void csv_field(std::string& out, std::string_view v);
// A SQL string literal: quoted, quotes doubled.
std::string sql_literal(std::string_view v);
// The table's name without its schema ("public.orders" -> "orders").
std::string last_part(const std::string& table);

}  // namespace picomq::redshift
