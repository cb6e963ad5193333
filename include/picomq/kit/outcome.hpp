#pragma once
// What an HTTP exchange means for the records it carried: one exhaustive mapping from transport
// failures and statuses to an Outcome, per-sink overrides on top, and the step from an outcome
// to the SDK's result (an exception, or a completed sdk::Pending).
//
//   static const kit::OutcomeRules rules = kit::OutcomeRules().on(
//       409, kit::Outcome::Written, "Elasticsearch: version conflict on create = document already there");
//   const kit::Classification c = rules.classify(response);
//   kit::complete(pending, c, record_indices);
//
// Default table (RFC 9110 section 15, "Status Codes"; Retry-After: section 10.2.3):
//
//   2xx                       Written    the request succeeded (15.3)
//   408 Request Timeout       Retry      the server gave up waiting for the request (15.5.9)
//   429 Too Many Requests     Retry      rate limited; Retry-After says when (RFC 6585 section 4)
//   421 Misdirected Request   Retry      "MAY retry the request over a different connection" (15.5.20)
//   423 Locked, 425 Too Early Retry      the state that refused it is temporary (RFC 4918 11.3, RFC 8470 5.2)
//   413 Content Too Large     TooLarge   split the request and resend (15.5.14)
//   400 Bad Request           Rejected   the server cannot process these records (15.5.1)
//   409 Conflict, 412, 422    Rejected   these records conflict with the target's state, fail its
//                                        preconditions, or are well-formed but invalid (15.5.10, 15.5.13, 15.5.21)
//   other 4xx                 Fatal      401/403 credentials, 404/410 wrong URL, 405/501 wrong
//                                        method, 411/415/431 request setup...: configuration,
//                                        which a retry cannot fix and skipping records would hide
//   500, 502, 503, 504        Retry      the server or a gateway failed or is overloaded (15.6)
//   501, 505, 511             Fatal      the server does not implement the method / HTTP version,
//                                        or a proxy wants its own authentication (15.6.2, 15.6.6, RFC 6585 6)
//   other 5xx                 Retry      a server-side failure
//   1xx, 3xx, others          Fatal      redirects are not followed (a write endpoint that moved is
//                                        a URL to fix; Location is quoted in the reason)
//
// Transport failures (no complete response):
//   cancelled, nothing sent            Retry
//   DNS, connect refused/unreachable   Retry         nothing was sent
//   timeout before anything was sent   Retry
//   any failure after (part of) the    MaybeWritten  the destination may have acted on it: a reset,
//   request was sent                                 a timeout waiting for the response, a cut response
//   TLS certificate problems           Fatal         untrusted or wrong-host certificate, unusable CA
//                                                    or client certificate files
//   invalid request (URL, headers)     Fatal         configuration
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/http_client.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit {

enum class Outcome {
  Written,       // the destination has the records
  Retry,         // nothing was written; send the same again later
  MaybeWritten,  // some or all may be written; resend (writes must be idempotent)
  Fatal,         // retrying cannot help (credentials, URL, configuration): the sink stops
  Rejected,      // the destination refuses these records: the bad-record policy decides
  TooLarge,      // too large: split and resend
};
std::string_view to_string(Outcome outcome);

// The outcome of a status by the default table above (no overrides).
Outcome default_outcome(long status);

// The delay a Retry-After value asks for (RFC 9110 section 10.2.3): delay-seconds or an
// HTTP-date (all three formats section 5.6.7 requires recipients to accept, parsed by
// curl_getdate). A date in the past is zero; anything else is nullopt.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      std::chrono::system_clock::time_point now);

struct Classification {
  Outcome outcome = Outcome::Fatal;
  // Why, for the user: method, redacted URL, status line and a bounded, redacted excerpt of
  // the body (or the transport failure), and the override rule that decided, if one did.
  std::string reason{};
  // Retry: when the server said to come back (its Retry-After, capped).
  std::optional<std::chrono::seconds> retry_after{};
  long status = 0;  // 0: no response
};

class OutcomeRules {
 public:
  OutcomeRules() = default;

  // An override for `status`, with why (quoted in reasons: name the destination and the case).
  // Rules are tried in the order added; the first that matches decides.
  OutcomeRules& on(long status, Outcome outcome, std::string why);
  // The same, only when the response body contains `body_contains`, e.g.
  //   on(500, "Code: 117", Outcome::Rejected, "ClickHouse: unknown field in JSON = the data")
  OutcomeRules& on(long status, std::string body_contains, Outcome outcome, std::string why);
  // The statuses that mean written (the HTTP sink's success_statuses), instead of every 2xx.
  // A 2xx outside the set is then Fatal: the server answered in a way declared not a success,
  // and the same request would get the same answer.
  OutcomeRules& success_statuses(std::vector<long> statuses);
  // The longest Retry-After honoured (default 60 s): a server asking for an hour still gets
  // asked again within the runtime's retry budget.
  OutcomeRules& max_retry_after(std::chrono::seconds cap);
  // How much of a response body reasons quote (default 512 bytes).
  OutcomeRules& excerpt_bytes(size_t bytes);

  Classification classify(const HttpResponse& response,
                          std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) const;

 private:
  struct Rule {
    long status;
    std::string body_contains;  // empty: any body
    Outcome outcome;
    std::string why;
  };
  Outcome status_outcome(const HttpResponse& response, const Rule** decided_by) const;

  std::vector<Rule> rules_;
  std::optional<std::vector<long>> success_statuses_;
  std::chrono::seconds max_retry_after_{60};
  size_t excerpt_bytes_ = 512;
};

// ---------------------------------------------------------------- into the SDK's results

// Outcome -> SDK result:
//   Written       return / done()
//   Retry         sdk::RetryableError / retry()
//   MaybeWritten  sdk::PartialWriteError / partial()
//   Fatal         sdk::FatalError / fatal()
//   Rejected      each of `records` (indices in the batch) refused with the reason, the rest of
//                 the batch written (a synchronous sink: reject() is called for each; one
//                 record: sdk::RecordRejected)
//   TooLarge      reaches here only when the sink did not split: a single record is Rejected
//                 (too large for the destination), several are Fatal (configure smaller requests)
//
// A synchronous write of one record (write()).
void throw_unless_written(const Classification& c, size_t record_index);
// A synchronous write of several records; `reject` is the sink's BaseSink::reject.
using RejectRecord = std::function<void(size_t record_index, const std::string& reason)>;
void throw_unless_written(const Classification& c, std::span<const size_t> records, const RejectRecord& reject);
// An asynchronous write: completes `pending` (once; later calls do nothing, as with Pending).
void complete(sdk::Pending& pending, const Classification& c, std::span<const size_t> records);

}  // namespace picomq::kit
