#pragma once
// Which lines of a write request the server refused, read from its error answer (pure, no I/O).
//   1.x  400 {"error":"partial write: unable to parse '<line>': <why>\n... dropped=N"}
//        400 {"error":"partial write: field type conflict: input field \"f\" on measurement \"m\" is
//             type integer, already exists as type float dropped=N"}
//        400 {"error":"unable to parse '<line>': <why>"}        (no line of the request was valid)
//   2.x  422 {"code":"unprocessable entity","message":"failure writing points to database: partial
//             write: field type conflict: ... dropped=N"}
//        400 {"code":"invalid","message":"unable to parse '<line>': <why>"}
//   3.x  400 {"error":"partial write of line protocol occurred","data":[{"original_line":"...",
//             "line_number":2,"error_message":"..."}]}    (line numbers from 1; InfluxDB 3 docs)
// A parse error names the line itself; a field type conflict names the measurement and field, and
// the refused lines are those of that measurement whose field has the conflicting type. When what
// is named does not account for every dropped line (dropped=N), the answer is "not identified":
// the sink then bisects the request (resending written points is harmless: the same series and
// time overwrite).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace picomq::influxdb {

struct RefusedLines {
  std::vector<std::pair<size_t, std::string>> lines;  // index in the request's lines, why
  // The server wrote the other lines ("partial write" with every refused line identified);
  // false: the other lines must be sent again (nothing, or not provably all, was written).
  bool rest_written = false;
};

// The refused lines of a 400 / 422 answer `body` to a request of `lines` (each without or with its
// '\n'), or nullopt when the answer names none of them or does not account for all it dropped.
std::optional<RefusedLines> refused_lines(std::string_view body, const std::vector<std::string_view>& lines);

// The server's error text of an answer: 1.x "error", 2.x "message" (with "code"), else the body.
std::string error_text(std::string_view body);

}  // namespace picomq::influxdb
