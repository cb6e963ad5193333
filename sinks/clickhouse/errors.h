#pragma once
// What a ClickHouse HTTP response means for the rows it carried, by the server's exception code
// (the X-ClickHouse-Exception-Code header of current servers, or "Code: N" at the start of the
// body, which 18.16 sends alone). Transport failures and responses without a code go through the
// kit's HTTP table (picomq/kit/outcome.hpp). The table is docs/sinks/clickhouse.md, "Errors".
#include <optional>
#include <string>

#include "picomq/kit/http_client.hpp"
#include "picomq/kit/outcome.hpp"

namespace picomq::clickhouse {

// The exception code of a response, if it carries one.
std::optional<int> exception_code(const kit::HttpResponse& response);

// The outcome of an exception code: Retry (a transient server state: 3, 107, 159, 164, 202,
// 203, 209, 210, 241, 242, 252, 285, 425, 999), MaybeWritten (319: the insert's status is
// unknown), Rejected (the data: 6, 26, 27, 32, 33, 38, 41, 53, 69, 70, 72, 117, 131),
// Fatal (everything else: unknown table or database, authentication, access, settings...).
kit::Outcome code_outcome(int code);
// Why, in a few words, for the reason ("authentication failed: check user and password").
std::string code_hint(int code);

// The classification of a response: the code's outcome and a reason naming the code, or the
// kit's for a response without one. 2xx is Written.
kit::Classification classify(const kit::HttpResponse& response);

}  // namespace picomq::clickhouse
