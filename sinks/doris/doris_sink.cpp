// Doris sink: each batch's records as JSON lines into one existing Doris table by Stream Load
// (PUT /api/{db}/{table}/_stream_load on the FE, which answers 307 to a BE: the sink re-sends
// body and Basic auth to the Location itself; Expect: 100-continue; format json,
// read_json_by_line; optional columns / jsonpaths; max_filter_ratio).
//
// Labels are deterministic and replay-safe: a load holds records of one topic-partition whose
// offsets lie in one block of `label_span` offsets (loads are cut at those fixed boundaries and
// at the batch's end), and its label is {label_prefix}-{topic}-{partition}-{first}-{last}. Every
// retry of the same records re-sends the same label: Label Already Exists with FINISHED means
// already loaded (success), RUNNING means wait and re-check (get_load_state). After a restart
// (or a failed write) a partition's first load is checked before it is sent: a load of the
// previous run that started at the same offset (the committed offset always starts one) is
// looked up by its label for every end it can have had in that block; if one is there, the
// records up to its end are already loaded and are skipped. So a replay cut differently never
// loads a record twice.
//
// Outcomes: Success / Publish Timeout = written; Fail with filtered rows: the ErrorURL's rows
// are mapped back to their records (the JSON line as sent), rejected through the bad-record
// policy, and the rest re-sent under the same label (a failed load's label is free again);
// network errors / 5xx / timeouts: re-sent with the same label; auth, unknown table: fatal.
// two_phase_commit: every load of a batch is pre-committed, and committed together
// (PUT /api/{db}/_stream_load_2pc) only when the whole batch loaded; aborted otherwise.
//
// Change events (docs/changes.md; upserts and deletes by key): into a Unique Key table with a
// sequence column, each load `merge_type: MERGE` with `delete: pico_deleted=1` and
// `function_column.sequence_col: pico_version`; an upsert is its row with pico_version (its
// offset) and pico_deleted 0, a delete its key's fields with pico_deleted 1. Of the rows of one
// key Doris keeps the one of the highest sequence, so several changes to a key in one load keep
// the last, and a replayed change (an older or the same offset) changes nothing. No truncates
// (the sink has no SQL connection for TRUNCATE TABLE), no patches (a load's partial columns are
// the same for all its rows, and flexible partial updates refuse a sequence_col and MERGE).
// Docs: docs/sinks/doris.md.
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "doris/answers.h"
#include "doris/config.h"
#include "doris/loads.h"
#include "picomq/kit/encoding.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/option_groups.hpp"
#include "picomq/kit/option_values.hpp"
#include "picomq/kit/options.hpp"
#include "picomq/kit/record_id.hpp"
#include "picomq/kit/record_json.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/sdk.hpp"

namespace {

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using picomq::doris::Answer;
using picomq::doris::fatal_message;
using picomq::doris::Load;
using picomq::doris::option_table;
using picomq::doris::parse_answer;
using picomq::doris::parse_load_state;
using picomq::doris::plan;
using picomq::doris::Settings;
using picomq::doris::trim_below;

using kit::bounded;

class Retry : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

class DorisSink : public sdk::BaseSink<DorisSink> {
 public:
  static constexpr std::string_view sink_name = "doris";
  static constexpr std::string_view sink_version = "0.1.0";
  static constexpr std::string_view description =
      "Loads records into an existing Apache Doris table by Stream Load (JSON lines), with deterministic labels "
      "that make retries and replays load each record once; rows Doris filters are rejected; optional two-phase "
      "commit.";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches};
  static constexpr std::array native_data_planes{sdk::DataPlane::Batches};
  // Change events (docs/changes.md): upserts and deletes by key, by the delete sign and sequence
  // column of a Unique Key table. Truncates and patches are refused by the runtime, naming them.
  static constexpr uint32_t change_ops = PMQ_CHANGE_OPS_KEYED;
  static inline const kit::OptionTable<Settings>& options = option_table();
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) { plan(config, problems); }

  void open(const sdk::Config& config) {
    sdk::ConfigProblems problems;
    auto s = plan(config, problems);
    problems.throw_if_any();
    s_ = std::move(*s);
    kit::RecordJsonOptions o;
    o.layout = s_.document;
    writer_ = kit::RecordJsonWriter(o);
    if (s_.document == kit::JsonLayout::PayloadOnly) declare_unread_fields(PMQ_FIELD_HEADERS);
    prefix_ = s_.label_prefix ? *s_.label_prefix
                              : "picomq-" + (sink_key().empty() ? std::string("sink") : kit::url_safe(sink_key()));
    kit::HttpClientOptions client = kit::client_options(s_.http, s_.tls, kit::AuthSettings{});
    client.auth = kit::BasicAuth{s_.user, s_.password.value_or("")};
    client.max_in_flight = static_cast<size_t>(s_.probe_parallelism) + 2;
    client.max_response_body = 8u << 20;
    client.log_error = [this](const std::string& m) { log(sdk::LogLevel::Error, m); };
    client_ = std::make_unique<kit::HttpClient>(std::move(client));
    base_ = s_.url + "/api/" + s_.database;
    health_check();
  }

  // No close() of its own: the SDK signals stopping() first, which ends every wait below.

  void write_batch(const sdk::Batch& batch) {
    const pmq_batch& raw = batch.raw();
    const std::string tp = std::string(raw.topic) + "\x1f" + std::to_string(raw.partition);
    std::vector<Load> loads = cut(raw);
    if (raw.record_count == 0) return;
    const int64_t first = pmq_batch_record(&raw, 0)->offset,
                  last = pmq_batch_record(&raw, raw.record_count - 1)->offset;
    bool check = true;
    int64_t skip_until = -1;
    {
      std::lock_guard lock(mutex_);
      auto it = next_offset_.find(tp);
      check = it == next_offset_.end() || it->second != first;
      next_offset_.erase(tp);  // until this write succeeds
      auto sk = skip_until_.find(tp);
      if (sk != skip_until_.end()) {
        if (!check) skip_until = sk->second;
        skip_until_.erase(sk);
      }
    }
    // An earlier run's load found by the previous batch reached into this one: those records are loaded.
    if (skip_until >= first)
      for (auto& load : loads) trim_below(raw, load, skip_until + 1);
    int64_t loaded_beyond = -1;
    std::vector<std::string> precommitted;  // labels (two_phase_commit)
    try {
      for (size_t i = 0; i < loads.size(); ++i) {
        Load& load = loads[i];
        while (check && !load.positions.empty()) {
          // Did an earlier run load records from load.first on? Its load started there too.
          auto found = probe(raw, load);
          if (!found) break;
          auto [end, state] = *found;
          if (state == "PRECOMMITTED") {
            if (s_.two_phase_commit && end == load.last)
              break;  // ours, pre-committed: the load answers Label Already Exists
            abort_label(label(raw, load.first, end));
            break;
          }
          count("already_written_loads");
          log(sdk::LogLevel::Info, "replay: " + std::string(raw.topic) + "[" + std::to_string(raw.partition) +
                                       "] offsets " + std::to_string(load.first) + ".." + std::to_string(end) +
                                       " were loaded already (label " + label(raw, load.first, end) + ", " + state +
                                       "): skipped");
          // Drop the records up to `end`; the rest is a load starting at the next record.
          trim_below(raw, load, end + 1);
          if (load.positions.empty() && end > load.last) {
            // The earlier load reached beyond this one (a longer batch, a byte cut that moved):
            // its records in the next loads and batches are loaded too.
            for (size_t j = i + 1; j < loads.size(); ++j) trim_below(raw, loads[j], end + 1);
            loaded_beyond = std::max(loaded_beyond, end);
          }
        }
        if (load.positions.empty()) continue;
        check = false;
        run_load(raw, load, precommitted);
      }
      if (s_.two_phase_commit) commit_all(precommitted);
    } catch (...) {
      if (s_.two_phase_commit) abort_quietly(precommitted);
      throw;
    }
    std::lock_guard lock(mutex_);
    next_offset_[tp] = last + 1;
    if (loaded_beyond > last) skip_until_[tp] = loaded_beyond;
  }

 private:
  // ------------------------------------------------------------------ loads and labels (doris/loads.h)

  std::vector<Load> cut(const pmq_batch& raw) {
    picomq::doris::Cut c = picomq::doris::cut_loads(raw, writer_, s_.label_span, s_.max_load_bytes.bytes);
    if (c.tombstones) count("skipped_tombstones", c.tombstones);
    if (c.keyless_deletes) count("skipped_keyless_deletes", c.keyless_deletes);
    return std::move(c.loads);
  }

  std::string label(const pmq_batch& raw, int64_t first, int64_t last) const {
    return picomq::doris::load_label(prefix_, raw, first, last);
  }

  // ------------------------------------------------------------------ replay check

  // The end offset and state of a load of an earlier run that started at load.first and is not
  // aborted, if there is one. Its end lies in load.first's block: first the end this load has,
  // then the offsets of its other records, then (when this load ends where its batch does) every
  // offset up to the end of the block, since the earlier batch may have been longer.
  std::optional<std::pair<int64_t, std::string>> probe(const pmq_batch& raw, const Load& load) {
    std::vector<int64_t> ends{load.last};
    for (auto it = load.positions.rbegin(); it != load.positions.rend(); ++it) {
      const int64_t o = pmq_batch_record(&raw, *it)->offset;
      if (o != load.last) ends.push_back(o);
    }
    if (load.ends_at_batch_end) {
      const int64_t block_end = (load.first / s_.label_span + 1) * s_.label_span - 1;
      for (int64_t o = load.last + 1; o <= block_end; ++o) ends.push_back(o);
    }
    count("label_probes", ends.size());
    std::optional<std::pair<int64_t, std::string>> found;
    const size_t step = static_cast<size_t>(s_.probe_parallelism);
    for (size_t from = 0; from < ends.size() && !found; from += step) {
      const size_t n = std::min(step, ends.size() - from);
      std::vector<kit::HttpRequest> requests;
      for (size_t k = 0; k < n; ++k)
        requests.push_back(
            {.method = "GET",
             .url = base_ + "/get_load_state?label=" + kit::percent_encode(label(raw, load.first, ends[from + k])),
             .timeout = 30s});
      const std::vector<kit::HttpResponse> answers = client_->send_all(std::move(requests));
      std::vector<std::string> states(n);
      for (size_t k = 0; k < n; ++k) {
        std::string error;
        if (!parse_load_state(answers[k], states[k], error))
          throw sdk::RetryableError("checking which loads an earlier run made (get_load_state): " + error);
      }
      for (size_t k = 0; k < n; ++k) {
        std::string st = states[k];
        if (st == "PREPARE") st = await_end(label(raw, load.first, ends[from + k]));  // still running: wait for it
        if (st == "VISIBLE" || st == "COMMITTED" || st == "PRECOMMITTED")
          if (!found || ends[from + k] > found->first) found = std::pair{ends[from + k], st};
      }
    }
    return found;
  }

  // The state of a running load (PREPARE) once it ended, waiting with back-off up to retry_timeout.
  std::string await_end(const std::string& l) {
    kit::RetryWait retry(stopping(), s_.retry_timeout, {.initial = 200ms, .max = 2s});
    while (true) {
      std::string st;
      try {
        st = load_state(l);
      } catch (const Retry& e) {
        st = "PREPARE";
      }
      if (st != "PREPARE") return st;
      if (!retry.wait({}, [&](auto) { count("running_waits"); }))
        throw sdk::RetryableError("a load with label " + l + " is still running " +
                                  (retry.stopped() ? std::string("as the sink stops") : "after retry_timeout"));
    }
  }

  std::string load_state(const std::string& l) {
    kit::HttpResponse r = client_->send(
        {.method = "GET", .url = base_ + "/get_load_state?label=" + kit::percent_encode(l), .timeout = 30s});
    std::string state, error;
    if (!parse_load_state(r, state, error)) throw Retry("get_load_state of label " + l + ": " + error);
    return state;
  }

  // ------------------------------------------------------------------ one load

  // PUT to the FE, then to where its 307 points, with the same body, headers and auth.
  kit::HttpResponse put(const std::string& url, const kit::HttpHeaders& headers, const std::string& body) {
    std::string target = url;
    for (int hop = 0; hop < 3; ++hop) {
      kit::HttpResponse r = client_->send({.method = "PUT",
                                           .url = target,
                                           .headers = headers,
                                           .body = kit::HttpBody::borrowed(body),
                                           .timeout = s_.load_timeout + 5s});
      if (r.completed() && (r.status == 307 || r.status == 302 || r.status == 301 || r.status == 308)) {
        auto location = r.headers.get("Location");
        if (!location || location->empty()) return r;
        count("redirects");
        target = std::string(*location);
        continue;
      }
      return r;
    }
    throw Retry("more than 3 redirects from " + kit::redact_url(url));
  }

  kit::HttpHeaders load_headers(const std::string& l, bool changes) const {
    kit::HttpHeaders h;
    h.set("Expect", "100-continue");
    h.set("Content-Type", "application/json");
    h.set("label", l);
    h.set("format", "json");
    h.set("read_json_by_line", "true");
    h.set("max_filter_ratio", std::to_string(s_.max_filter_ratio));
    h.set("strict_mode", s_.strict_mode ? "true" : "false");
    h.set("timeout", std::to_string(std::max<int64_t>(1, s_.load_timeout.count() / 1000)));
    if (s_.columns) h.set("columns", *s_.columns);
    if (s_.jsonpaths) h.set("jsonpaths", *s_.jsonpaths);
    if (s_.two_phase_commit) h.set("two_phase_commit", "true");
    if (changes) {
      // Stream Load's batch delete and sequence column (docs/sinks/doris.md, "Change events").
      h.set("merge_type", "MERGE");
      h.set("delete", std::string(picomq::doris::kDeletedColumn) + "=1");
      h.set("function_column.sequence_col", std::string(picomq::doris::kVersionColumn));
    }
    return h;
  }

  void run_load(const pmq_batch& raw, Load load, std::vector<std::string>& precommitted) {
    const std::string l = label(raw, load.first, load.last);
    const std::string where = "Stream Load of " + std::string(raw.topic) + "[" + std::to_string(raw.partition) +
                              "] offsets " + std::to_string(load.first) + ".." + std::to_string(load.last) +
                              " (label " + l + ") into " + s_.database + "." + s_.table;
    kit::RetryWait retry(stopping(), s_.retry_timeout);
    std::string body;
    bool rebuild = true;
    auto wait_or_fail = [&](const std::string& why) {
      const bool waited = retry.wait({}, [&](std::chrono::milliseconds d) {
        count("resends");
        log(sdk::LogLevel::Debug, where + ": resending in " + std::to_string(d.count()) + " ms: " + why);
      });
      if (!waited)
        throw sdk::RetryableError(where + ": " + bounded(why) + (retry.stopped() ? " (stopping;" : " (") +
                                  " the same label is re-sent on the retry)");
    };
    while (true) {
      if (load.positions.empty()) return;
      if (rebuild) {
        body.clear();
        for (const auto& line : load.lines) {
          body += line;
          body += '\n';
        }
        rebuild = false;
      }
      kit::HttpResponse r;
      try {
        r = put(base_ + "/" + s_.table + "/_stream_load", load_headers(l, pmq_batch_has_changes(&raw) != 0), body);
      } catch (const Retry& e) {
        wait_or_fail(e.what());
        continue;
      }
      if (!r.completed() || r.status >= 500 || r.status == 429) {
        wait_or_fail(r.completed() ? "HTTP " + std::to_string(r.status) + ": " + r.body_excerpt(200)
                                   : "no answer: " + r.failure->message);
        continue;
      }
      if (r.status == 401 || r.status == 403)
        throw sdk::FatalError(where + ": HTTP " + std::to_string(r.status) +
                              " (check user and password, and LOAD on the table): " + r.body_excerpt(200));
      if (r.status != 200)
        throw sdk::FatalError(where + ": HTTP " + std::to_string(r.status) + ": " + r.body_excerpt(300));
      const Answer a = parse_answer(r.body);
      if (a.status == "Success" || a.status == "Publish Timeout") {
        count("loads");
        count("written_records", load.positions.size() - static_cast<size_t>(std::max<int64_t>(0, a.filtered)));
        if (pmq_batch_has_changes(&raw)) {
          size_t deletes = 0;
          for (size_t p : load.positions)
            if (pmq_record_op(&raw, pmq_batch_record(&raw, p)) == PMQ_OP_DELETE) ++deletes;
          if (deletes) count("delete_rows", deletes);
        }
        if (a.filtered > 0) reject_filtered(raw, load, a, where, false);
        if (s_.two_phase_commit) precommitted.push_back(l);
        return;
      }
      if (a.status == "Label Already Exists") {
        if (a.existing == "FINISHED" || a.existing == "VISIBLE" || a.existing == "COMMITTED") {
          count("already_written_loads");
          return;
        }
        if (a.existing == "PRECOMMITTED") {
          if (s_.two_phase_commit) {  // ours (an answer lost): commit it with the others
            precommitted.push_back(l);
            return;
          }
          abort_label(l);
          continue;
        }
        // RUNNING (or unknown): wait for it to end, then decide.
        std::string state;
        try {
          state = load_state(l);
        } catch (const Retry& e) {
          wait_or_fail(e.what());
          continue;
        }
        if (state == "VISIBLE" || state == "COMMITTED") {
          count("already_written_loads");
          return;
        }
        if (state == "ABORTED" || state == "UNKNOWN") continue;  // free again: send it
        if (state == "PRECOMMITTED") continue;                   // handled as above on the next answer
        wait_or_fail("a load with this label is " + (a.existing.empty() ? state : a.existing));
        continue;
      }
      if (a.status == "Fail") {
        if (a.filtered > 0 && !a.error_url.empty()) {
          // Nothing was loaded and the label is free: reject the filtered rows, re-send the rest.
          load = reject_filtered(raw, load, a, where, true);
          rebuild = true;
          continue;
        }
        if (fatal_message(a.message)) throw sdk::FatalError(where + " failed: " + bounded(a.message));
        wait_or_fail("Fail: " + a.message);
        continue;
      }
      if (a.status.empty())
        throw sdk::FatalError(where +
                              ": not a Stream Load answer (is url the FE's HTTP port?): " + r.body_excerpt(300));
      if (fatal_message(a.message)) throw sdk::FatalError(where + ": " + a.status + ": " + bounded(a.message));
      wait_or_fail(a.status + ": " + a.message);
    }
  }

  // Reads the ErrorURL and rejects the records of its rows ("Reason: ... src line [<line>]; ").
  // With `keep_rest`, returns the load without them (to re-send); a row that maps to no record
  // is an error (nothing to re-send safely).
  Load reject_filtered(const pmq_batch&, const Load& load, const Answer& a, const std::string& where, bool keep_rest) {
    kit::HttpResponse r;
    kit::RetryWait retry(stopping(), 3s, {.initial = 200ms, .max = 1s});  // a few attempts: the BE serves it at once
    do {
      r = client_->send({.method = "GET", .url = a.error_url, .timeout = 30s});
      if (r.completed() && r.status == 200) break;
    } while (retry.wait());
    if (!r.completed() || r.status != 200)
      throw sdk::RetryableError(where + ": " + std::to_string(a.filtered) + " rows filtered, and their ErrorURL " +
                                kit::redact_url(a.error_url) + " could not be read: " +
                                (r.completed() ? "HTTP " + std::to_string(r.status) : r.failure->message));
    std::unordered_multimap<std::string_view, size_t> by_line;
    for (size_t k = 0; k < load.lines.size(); ++k) by_line.emplace(load.lines[k], k);
    std::set<size_t> refused;
    std::string_view text = r.body;
    size_t pos = 0, mapped = 0;
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string_view::npos) eol = text.size();
      std::string_view entry = text.substr(pos, eol - pos);
      pos = eol + 1;
      const size_t src = entry.find("src line [");
      if (src == std::string_view::npos) continue;
      std::string_view reason = entry.substr(0, src);
      if (reason.rfind("Reason: ", 0) == 0) reason.remove_prefix(8);
      while (!reason.empty() && (reason.back() == ' ' || reason.back() == '.')) reason.remove_suffix(1);
      std::string_view line = entry.substr(src + 10);
      const size_t close = line.rfind(']');
      if (close == std::string_view::npos) continue;
      line = line.substr(0, close);
      auto [from, to] = by_line.equal_range(line);
      for (auto it = from; it != to; ++it) {
        if (refused.insert(it->second).second) {
          ++mapped;
          reject(load.positions[it->second],
                 "Doris refused the row: " + bounded(std::string(reason)) + " (" + where + ")");
          count("rejected_records");
          break;
        }
      }
    }
    if (mapped == 0 || (keep_rest && static_cast<int64_t>(mapped) < a.filtered))
      throw sdk::FatalError(where + ": Doris filtered " + std::to_string(a.filtered) +
                            " rows but its error log names " + std::to_string(mapped) + " of the sent rows (ErrorURL " +
                            kit::redact_url(a.error_url) + "); nothing is rejected blindly");
    Load rest;
    rest.first = load.first;
    rest.last = load.last;
    for (size_t k = 0; k < load.positions.size(); ++k) {
      if (refused.count(k)) continue;
      rest.positions.push_back(load.positions[k]);
      rest.lines.push_back(load.lines[k]);
    }
    return rest;
  }

  // ------------------------------------------------------------------ two-phase commit

  // PUT /api/{db}/_stream_load_2pc {txn_operation, label}: true when done (or done already).
  bool two_pc(const std::string& l, const char* op, std::string& why) {
    kit::HttpHeaders h;
    h.set("txn_operation", op);
    h.set("label", l);
    kit::HttpResponse r;
    try {
      r = put(base_ + "/_stream_load_2pc", h, std::string());
    } catch (const Retry& e) {
      why = e.what();
      return false;
    }
    if (!r.completed() || r.status != 200) {
      why = r.completed() ? "HTTP " + std::to_string(r.status) + ": " + r.body_excerpt(200)
                          : "no answer: " + r.failure->message;
      return false;
    }
    const Answer a = parse_answer(r.body);
    if (a.status == "Success") return true;
    why = a.status + ": " + a.message;
    if (std::string(op) == "commit" && a.message.find("already visible") != std::string::npos) return true;
    if (std::string(op) == "abort" && a.message.find("already aborted") != std::string::npos) return true;
    return false;
  }

  void commit_all(const std::vector<std::string>& labels) {
    for (const auto& l : labels) {
      kit::RetryWait retry(stopping(), s_.retry_timeout);
      std::string why;
      while (!two_pc(l, "commit", why))
        if (!retry.wait())
          throw sdk::RetryableError(
              "committing the pre-committed load " + l + " (_stream_load_2pc) failed: " + bounded(why) +
              (retry.stopped() ? " (stopping; the retry commits it)" : " (the retry commits it)"));
      count("commits");
    }
  }

  void abort_label(const std::string& l) {
    std::string why;
    if (!two_pc(l, "abort", why))
      throw sdk::RetryableError("aborting the pre-committed load " + l + " of an earlier run failed: " + bounded(why));
    count("aborts");
  }

  void abort_quietly(const std::vector<std::string>& labels) {
    for (const auto& l : labels) {
      std::string why;
      if (two_pc(l, "abort", why)) {
        count("aborts");
      } else {
        std::string message = "aborting the pre-committed load " + l;
        message += " failed (Doris aborts it at its timeout; a retry aborts or commits it): ";
        message += why;
        log(sdk::LogLevel::Warn, message);
      }
    }
  }

  // ------------------------------------------------------------------ health

  // The FE's get_load_state with a label nobody uses: connects and checks the credentials.
  // An unreachable FE is a warning (the sink starts; each write retries).
  void health_check() {
    kit::HttpResponse r =
        client_->send({.method = "GET", .url = base_ + "/get_load_state?label=picomq-health-check", .timeout = 5s});
    std::string state, error;
    if (!r.completed() || r.status >= 500) {
      count("destination_unreachable");
      log(sdk::LogLevel::Warn, "the Doris FE is not reachable now (the sink starts and retries with each write): " +
                                   (r.completed() ? "HTTP " + std::to_string(r.status) : r.failure->message));
      return;
    }
    if (!parse_load_state(r, state, error))
      throw sdk::FatalError("connecting to the Doris FE at " + kit::redact_url(s_.url) + ": " + error);
    log(sdk::LogLevel::Info,
        "connected to the Doris FE at " + kit::redact_url(s_.url) + ": table " + s_.database + "." + s_.table +
            ", labels " + prefix_ + "-..., label_span " + std::to_string(s_.label_span) +
            (s_.two_phase_commit ? ", two-phase commit" : "") +
            (s_.changes ? ", change events (MERGE with the delete sign, sequence pico_version)" : ""));
  }

  Settings s_;
  kit::RecordJsonWriter writer_;
  std::string prefix_, base_;
  std::mutex mutex_;
  std::map<std::string, int64_t> next_offset_;  // topic \x1f partition -> the offset a continuing batch starts at
  std::map<std::string, int64_t> skip_until_;   // records up to there were loaded by an earlier run's load
  std::unique_ptr<kit::HttpClient> client_;
};

PICOMQ_SINK_PLUGIN(DorisSink)
