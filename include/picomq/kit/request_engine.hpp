#pragma once
// The request engine: how an HTTP sink's batch becomes requests and the requests become the
// batch's outcome. A sink says how a request is made for a run of items, how one item renders
// into a body, and (when its destination answers per item) what a response means; the engine
// does the rest, the same way for every sink:
//
//  - cuts the items into requests of at most max_bytes / max_records (the splitter), sends them
//    with the client's requests in flight, and completes the batch's write once, when its last
//    request is done (BatchCompletion: a Fatal failure stops the sink, another failure is a
//    retry or a partial write, refused items go to the bad-record policy);
//  - classifies every response by the sink's OutcomeRules, and by default:
//      Written              the items are written
//      Rejected / TooLarge  several items: two halves, each a request with a fresh budget
//                           (bisection down to the items the destination refuses; a 413
//                           split); one item: refused ("refused by <destination>: ...")
//      Retry / MaybeWritten sent again after a back-off (200 ms doubling to 5 s with jitter, at
//                           least the server's Retry-After) while the request's budget
//                           (retry_timeout from its first send) lasts; then the write fails as a
//                           retry (partial when something may be written) and the runtime's own
//                           retry takes over
//      Fatal                the write fails as fatal: the sink stops
//  - stop() (the host stopping, sink ABI 2.6): resends still waiting are completed at once as
//    retries and refusals are no longer resent; requests on the wire and work that progresses
//    (task polls) go on, so a healthy destination's writes still complete. close(): the same,
//    and the polls end too;
//  - reasons are redacted (the client's secrets) and bounded; counters: requests, resends,
//    splits, rejected_records, and the items written under the sink's name for them.
//
//   struct BulkJob : kit::RequestJob {
//     using RequestJob::RequestJob;
//     void render(size_t item, std::string& out) const override { encoder.append(out, items[item]); }
//     kit::HttpRequest request(const kit::Run&) const override { return {.method = "POST", .url = bulk_url}; }
//     void on_response(kit::Reply& reply) override {          // optional: per-item answers
//       if (reply.classification().outcome != kit::Outcome::Written) return reply.follow();
//       ... reply.reject(k, why); reply.resend({k...}, why); reply.written(n); ...
//     }
//   };
//   sdk::Pending write_batch(const sdk::Batch& batch) {
//     auto job = std::make_shared<BulkJob>(pending());
//     ...
//     engine_->submit(job, job->items.size());
//     return job->result();
//   }
//
// Threads: on_response runs on the client's I/O thread (or the caller's, for a request sent
// after close()), never two at once for one request; it must not block (a blocking step goes to
// Reply::resend_after).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/backoff.hpp"
#include "picomq/kit/batch_completion.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/outcome.hpp"
#include "picomq/kit/resend.hpp"
#include "picomq/kit/scheduler.hpp"
#include "picomq/kit/splitter.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit {

// The items of a write that one request carries, in order, and the request's form.
struct Run {
  std::vector<size_t> items;  // positions in the job's items
  uint32_t variant = 0;       // the sink's own request forms (0: the usual one)
};

class Reply;
class RequestEngine;

// One batch's write as requests. A sink derives its per-batch state from it (what render and
// request read stays alive until the write completes).
class RequestJob {
 public:
  explicit RequestJob(sdk::Pending pending) : result_(pending), done_(std::move(pending), 1) {}
  virtual ~RequestJob() = default;
  RequestJob(const RequestJob&) = delete;
  RequestJob& operator=(const RequestJob&) = delete;

  // One item into a body (appended to `out`); called again for a request's halves and resends.
  virtual void render(size_t item, std::string& out) const = 0;
  // The body of a run from its items rendered and framed (default: as it is). An envelope
  // around the items goes here.
  virtual std::string body(const Run& run, std::string rendered) const;
  // The request for a run: method, URL, headers. The engine sets the body.
  virtual HttpRequest request(const Run& run) const = 0;
  // What a response means for the run; the default follows the classification.
  virtual void on_response(Reply& reply);
  // The record (index in the batch) of an item, for the bad-record policy. Default: the same.
  virtual size_t record(size_t item) const { return item; }
  // Said before reasons about this write (e.g. "index orders: "). Default: nothing.
  virtual std::string context() const { return {}; }

  // How items sit in a body and how many a request takes. Set before submit().
  Framing framing = Framing::none();
  SplitLimits limits{};
  // The framing of a request form (default: `framing` for every form).
  virtual Framing framing_for(uint32_t variant) const {
    (void)variant;
    return framing;
  }

  // A record refused before anything is sent (it cannot be rendered): the bad-record policy,
  // when the write otherwise succeeds.
  void reject(size_t record, std::string reason) { done_.reject(record, std::move(reason)); }
  // The write's result, to return from write_batch.
  sdk::Pending result() const { return result_; }
  BatchCompletion& completion() { return done_; }

 private:
  friend class Reply;
  friend class RequestEngine;
  sdk::Pending result_;
  BatchCompletion done_;
};

struct RequestEngineOptions {
  // A refused request is resent for this long from its first send (0: never resent here).
  std::chrono::milliseconds retry_timeout{30'000};
  BackoffPolicy backoff = ResendBudget::kDefaultPolicy;
  std::string destination = "the destination";  // in reasons: "refused by the cluster: ..."
  std::string items = "records";                // in logs: "resending 12 documents in 400 ms"
  std::string written_counter{};                // counts the items written ("documents"); empty: not counted
  // One request on the wire at a time, in submission order: for destinations that apply requests
  // in the order they arrive (a task queue). A resend keeps its place; halves go first.
  bool in_order = false;
};

// A response to one request, and what the sink makes of it. Every call is optional; what the
// reply did when on_response returns (or when a held reply finishes) decides the request.
class Reply : public std::enable_shared_from_this<Reply> {
 public:
  const HttpResponse& response() const { return response_; }
  const Classification& classification() const { return classification_; }
  const Run& run() const { return run_; }
  // The request's body as sent (before the client's compression).
  const std::string& body() const { return *body_; }
  size_t size() const { return run_.items.size(); }
  // The job's item at position k of this request.
  size_t item(size_t k) const { return run_.items[k]; }
  RequestJob& job() { return *job_; }
  RequestEngine& engine() { return engine_; }
  // A reason as the engine says it: the job's context, then `text` redacted and bounded.
  std::string reason(std::string_view text) const;

  // The default: what the classification says (see the table at the top).
  void follow();
  void follow(const Classification& c);

  // `n` items written (counted), or some may be (the write then fails as partial, never as a
  // plain retry, when something else fails).
  void written(size_t n);
  void maybe_written();
  // Item k of this request refused (the bad-record policy); `reason` is said as it is.
  void reject(size_t k, std::string reason);
  // Items k of this request (all: empty) sent again after the back-off, within this request's
  // budget; when the budget is spent or the engine stopped, the write fails with `why`.
  void resend(const std::vector<size_t>& ks, const Classification& why);
  // Items k of this request sent again now, with a fresh budget, in `variant`'s form (the rest of
  // a partial write; the same items one statement each).
  void send_again(const std::vector<size_t>& ks, uint32_t variant = 0);
  // This request's items in two requests (bisection, a 413), each with a fresh budget.
  void split(std::string_view why);
  // The write fails (the first failure is kept; a Fatal one outranks the others).
  void fail(const Classification& c);
  // `task` runs on the engine's scheduler thread (it may block: fetching a token), then this
  // request is sent again with its budget, unless the task returns a failure (the write's) or
  // throws (sdk::FatalError: Fatal; another exception: Retry).
  void resend_after(std::function<std::optional<Classification>()> task);

  // Keeps the request open after on_response returns (its answer continues asynchronously, e.g.
  // a task to poll); the held reply's calls still apply, and finish() ends it.
  std::shared_ptr<Reply> hold();
  void finish();
  // in_order: lets the next request go before this one is finished (its effect is ordered
  // already: the destination has queued it).
  void release_order();

 private:
  friend class RequestEngine;
  Reply(RequestEngine& engine, std::shared_ptr<RequestJob> job, Run run, std::shared_ptr<const std::string> body,
        ResendBudget budget, HttpResponse response, Classification c);

  RequestEngine& engine_;
  std::shared_ptr<RequestJob> job_;
  Run run_;
  std::shared_ptr<const std::string> body_;
  ResendBudget budget_;
  HttpResponse response_;
  Classification classification_;
  bool held_ = false, finished_ = false;
  bool order_released_ = false;  // in_order: the next request went, or a resend took this one's place
  // in_order: a resend that takes this request's place goes straight to the wire; after the
  // order was released it queues first instead.
  bool take_place();
};

class RequestEngine {
 public:
  using Count = std::function<void(const char* counter, uint64_t n)>;
  using Log = std::function<void(sdk::LogLevel level, const std::string& message)>;

  // `client` and `rules` outlive the engine (the sink owns them).
  RequestEngine(HttpClient& client, const OutcomeRules& rules, RequestEngineOptions options, Count count = {},
                Log log = {});
  ~RequestEngine();  // close()

  // An engine counting and logging into a sink's own: for_host(host(), ...) in a BaseSink's open().
  static std::unique_ptr<RequestEngine> for_host(const pmq_host_api* host, HttpClient& client,
                                                 const OutcomeRules& rules, RequestEngineOptions options) {
    return std::make_unique<RequestEngine>(client, rules, std::move(options), host_count(host), host_log(host));
  }
  static Count host_count(const pmq_host_api* host);
  static Log host_log(const pmq_host_api* host);
  RequestEngine(const RequestEngine&) = delete;
  RequestEngine& operator=(const RequestEngine&) = delete;

  // Sends items [0, count) of `job` cut into requests by its limits, and each of `runs` as one
  // request as it is (items the splitter must not group, e.g. DELETEs by key), then completes
  // the job's write when its last request is done (at once when there is none).
  void submit(const std::shared_ptr<RequestJob>& job, size_t count, std::vector<Run> runs = {});
  // Items [first, first + count) of each segment cut into requests of the segment's form (a
  // request never mixes segments: runs of one operation each), in segment order.
  struct Segment {
    size_t first = 0, count = 0;
    uint32_t variant = 0;
  };
  void submit(const std::shared_ptr<RequestJob>& job, const std::vector<Segment>& segments);

  // Work later on the engine's task thread (polls of a task the destination runs): stop() lets
  // it run, close() runs it with run = false.
  void after(std::chrono::milliseconds delay, Scheduler::Task task) { tasks_.after(delay, std::move(task)); }
  HttpClient& client() { return client_; }
  const RequestEngineOptions& options() const { return options_; }
  bool stopped() const { return stopped_; }  // no more resends
  bool closed() const { return closed_; }    // nor polls
  std::string bounded(std::string_view text) const { return client_.redactor().bounded(text); }
  void count(const char* counter, uint64_t n = 1) const {
    if (count_ && n) count_(counter, n);
  }
  void log(sdk::LogLevel level, const std::string& message) const {
    if (log_) log_(level, message);
  }

  // Stops resending: resends waiting are completed as retries, now, and later refusals are not
  // resent. Requests on the wire and after() tasks go on. Any thread; idempotent; never blocks
  // for long (joins the resend thread).
  void stop();
  // stop(), and after() tasks end (run = false). Requests on the wire end with the client (the
  // sink closes it after). Idempotent.
  void close();

 private:
  friend class Reply;
  struct Send {
    std::shared_ptr<RequestJob> job;
    Run run;
    std::shared_ptr<const std::string> body;
    ResendBudget budget;
  };
  ResendBudget fresh_budget() const { return ResendBudget(options_.retry_timeout, options_.backoff); }
  std::shared_ptr<const std::string> render(const RequestJob& job, const Run& run) const;
  std::vector<Send> cut(const std::shared_ptr<RequestJob>& job, const std::vector<Segment>& segments) const;
  void start(const std::shared_ptr<RequestJob>& job, std::vector<Send> sends);
  // A resend's time came: on the wire at once when it holds its place in the order, else queued first.
  void resume(Send send, bool holds_place);
  // Sends, or (in_order) queues at the back, or at the front when `first` (halves, the rest of
  // a request: they go before what waits).
  void dispatch(std::vector<Send> sends, bool first);
  void transmit(Send send);
  // in_order: the next queued request on the wire, or the engine idle when none waits.
  void next_in_order();
  void send_next(std::unique_lock<std::mutex> lock);  // the same, with order_mutex_ held
  // A resend that will not happen (stopping, or its task failed): the request completes as `failed`.
  void abandon(const Send& send, const Classification& failed, bool holds_place);
  void respond(Send send, HttpResponse response);

  HttpClient& client_;
  const OutcomeRules& rules_;
  RequestEngineOptions options_;
  Count count_;
  Log log_;
  std::atomic<bool> stopped_{false}, closed_{false};
  std::mutex order_mutex_;
  std::deque<Send> queue_;  // in_order: waiting for the request on the wire
  bool busy_ = false;
  Scheduler tasks_;    // after(): polls
  Scheduler resends_;  // last: its thread stops first
};

}  // namespace picomq::kit
