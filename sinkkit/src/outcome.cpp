#include "picomq/kit/outcome.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>

namespace picomq::kit {

namespace {

// Exhaustive on purpose (no default): a new TransportError must be classified here.
Outcome transport_outcome(const TransportFailure& failure) {
  const Outcome by_progress = failure.sent == SendProgress::Nothing ? Outcome::Retry : Outcome::MaybeWritten;
  switch (failure.error) {
    case TransportError::InvalidRequest:
    case TransportError::TlsCertificate: return Outcome::Fatal;
    case TransportError::None:  // a failure without an error: trust only what the progress says
    case TransportError::Cancelled:
    case TransportError::NameResolution:
    case TransportError::Connect:
    case TransportError::Timeout:
    case TransportError::Tls:
    case TransportError::Send:
    case TransportError::Receive:
    case TransportError::Protocol:
    case TransportError::Other: return by_progress;
  }
  return by_progress;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string describe_status(const HttpResponse& r) {
  return r.status_line.empty() ? "HTTP " + std::to_string(r.status) : r.status_line;
}

[[noreturn]] void throw_for(Outcome outcome, const std::string& reason) {
  switch (outcome) {
    case Outcome::Retry: throw sdk::RetryableError(reason);
    case Outcome::MaybeWritten: throw sdk::PartialWriteError(reason);
    case Outcome::Written:
    case Outcome::Fatal:
    case Outcome::Rejected:
    case Outcome::TooLarge: break;
  }
  throw sdk::FatalError(reason);
}

// What Rejected and TooLarge come to for a request of `records` records: the reason each is set
// aside with, or, when there is nothing to set aside (a control request) or several records
// were sent unsplit, the reason the sink stops.
struct Refusal {
  std::string record_reason;
  std::optional<std::string> fatal;
};
Refusal refusal_of(const Classification& c, size_t records) {
  if (c.outcome == Outcome::TooLarge) {
    if (records != 1)
      return {{},
              c.reason + ": " + std::to_string(records) +
                  " records in one request were not split; configure smaller requests for this destination"};
    return {"too large for the destination: " + c.reason, std::nullopt};
  }
  if (records == 0) return {{}, c.reason};
  return {c.reason, std::nullopt};
}

}  // namespace

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::Written: return "written";
    case Outcome::Retry: return "retry";
    case Outcome::MaybeWritten: return "maybe written";
    case Outcome::Fatal: return "fatal";
    case Outcome::Rejected: return "rejected";
    case Outcome::TooLarge: return "too large";
  }
  return "?";
}

Outcome default_outcome(long status) {
  if (status >= 200 && status <= 299) return Outcome::Written;
  switch (status) {
    case 408:
    case 421:
    case 423:
    case 425:
    case 429: return Outcome::Retry;
    case 413: return Outcome::TooLarge;
    case 400:
    case 409:
    case 412:
    case 422: return Outcome::Rejected;
    case 501:
    case 505:
    case 511: return Outcome::Fatal;
    default: break;
  }
  if (status >= 400 && status <= 499) return Outcome::Fatal;
  if (status >= 500 && status <= 599) return Outcome::Retry;
  return Outcome::Fatal;
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      std::chrono::system_clock::time_point now) {
  value = trim(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 9) return std::chrono::seconds(999'999'999);  // beyond any cap; no overflow
    return std::chrono::seconds(std::stol(std::string(value)));
  }
  // Every HTTP-date names its month and weekday; this keeps curl_getdate's leniency with bare
  // numbers ("-5", "1.5") out.
  if (std::none_of(value.begin(), value.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  const time_t at = curl_getdate(std::string(value).c_str(), nullptr);
  if (at == -1) return std::nullopt;
  const auto delay = std::chrono::system_clock::from_time_t(at) - now;
  return std::max(std::chrono::seconds(0), std::chrono::ceil<std::chrono::seconds>(delay));
}

OutcomeRules& OutcomeRules::on(long status, Outcome outcome, std::string why) {
  rules_.push_back({status, {}, outcome, std::move(why)});
  return *this;
}

OutcomeRules& OutcomeRules::on(long status, std::string body_contains, Outcome outcome, std::string why) {
  rules_.push_back({status, std::move(body_contains), outcome, std::move(why)});
  return *this;
}

OutcomeRules& OutcomeRules::success_statuses(std::vector<long> statuses) {
  success_statuses_ = std::move(statuses);
  return *this;
}

OutcomeRules& OutcomeRules::max_retry_after(std::chrono::seconds cap) {
  max_retry_after_ = cap;
  return *this;
}

OutcomeRules& OutcomeRules::excerpt_bytes(size_t bytes) {
  excerpt_bytes_ = bytes;
  return *this;
}

// Overrides first, then the success set, then the default table.
Outcome OutcomeRules::status_outcome(const HttpResponse& response, const Rule** decided_by) const {
  for (const Rule& rule : rules_) {
    if (rule.status != response.status) continue;
    if (!rule.body_contains.empty() && response.body.find(rule.body_contains) == std::string::npos) continue;
    *decided_by = &rule;
    return rule.outcome;
  }
  if (success_statuses_) {
    const auto& ok = *success_statuses_;
    if (std::find(ok.begin(), ok.end(), response.status) != ok.end()) return Outcome::Written;
    if (response.status >= 200 && response.status <= 299) return Outcome::Fatal;
  }
  return default_outcome(response.status);
}

Classification OutcomeRules::classify(const HttpResponse& response, std::chrono::system_clock::time_point now) const {
  Classification c;
  c.status = response.status;
  const std::string where = response.method + " " + response.url;
  if (const auto& failure = response.failure) {
    c.outcome = transport_outcome(*failure);
    c.reason = where + ": " + std::string(to_string(failure->error)) + " " + std::string(to_string(failure->sent));
    if (!failure->message.empty()) c.reason += ": " + failure->message;
    return c;
  }

  const Rule* rule = nullptr;
  c.outcome = status_outcome(response, &rule);
  c.reason = where + ": " + describe_status(response);
  if (success_statuses_ && !rule && c.outcome == Outcome::Fatal && response.status >= 200 && response.status <= 299)
    c.reason += " (not one of the success statuses)";
  if (response.status >= 300 && response.status <= 399)
    if (const auto location = response.headers.get("Location"))
      c.reason += " (Location: " + redact_url(*location) + "; redirects are not followed)";
  if (const std::string excerpt = response.body_excerpt(excerpt_bytes_); !excerpt.empty()) c.reason += ": " + excerpt;
  if (rule) c.reason += " [" + rule->why + "]";
  if (c.outcome == Outcome::Retry)
    if (const auto header = response.headers.get("Retry-After"))
      if (const auto delay = parse_retry_after(*header, now)) c.retry_after = std::min(*delay, max_retry_after_);
  return c;
}

void throw_unless_written(const Classification& c, size_t record_index) {
  throw_unless_written(c, std::span(&record_index, 1),
                       [](size_t index, const std::string& reason) { throw sdk::RecordRejected(index, reason); });
}

void throw_unless_written(const Classification& c, std::span<const size_t> records, const RejectRecord& reject) {
  switch (c.outcome) {
    case Outcome::Written: return;
    case Outcome::Rejected:
    case Outcome::TooLarge: {
      const Refusal refusal = refusal_of(c, records.size());
      if (refusal.fatal) throw sdk::FatalError(*refusal.fatal);
      for (size_t index : records) reject(index, refusal.record_reason);
      return;
    }
    case Outcome::Retry:
    case Outcome::MaybeWritten:
    case Outcome::Fatal: throw_for(c.outcome, c.reason);
  }
}

void complete(sdk::Pending& pending, const Classification& c, std::span<const size_t> records) {
  switch (c.outcome) {
    case Outcome::Written: return pending.done();
    case Outcome::Retry: return pending.retry(c.reason);
    case Outcome::MaybeWritten: return pending.partial(c.reason);
    case Outcome::Fatal: return pending.fatal(c.reason);
    case Outcome::Rejected:
    case Outcome::TooLarge: {
      const Refusal refusal = refusal_of(c, records.size());
      if (refusal.fatal) return pending.fatal(*refusal.fatal);
      for (size_t index : records) pending.reject(index, refusal.record_reason);
      return pending.done();
    }
  }
}

}  // namespace picomq::kit
