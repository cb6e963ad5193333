#include "picomq/kit/request_engine.hpp"

#include <cstddef>
#include <exception>
#include <utility>

namespace picomq::kit {

// ---------------------------------------------------------------- the job

std::string RequestJob::body(const Run&, std::string rendered) const { return rendered; }

void RequestJob::on_response(Reply& reply) { reply.follow(); }

// ---------------------------------------------------------------- a reply

Reply::Reply(RequestEngine& engine, std::shared_ptr<RequestJob> job, Run run, std::shared_ptr<const std::string> body,
             ResendBudget budget, HttpResponse response, Classification c)
    : engine_(engine),
      job_(std::move(job)),
      run_(std::move(run)),
      body_(std::move(body)),
      budget_(budget),
      response_(std::move(response)),
      classification_(std::move(c)) {}

std::string Reply::reason(std::string_view text) const { return job_->context() + engine_.bounded(text); }

void Reply::follow() { follow(classification_); }

void Reply::follow(const Classification& c) {
  const std::string& destination = engine_.options().destination;
  switch (c.outcome) {
    case Outcome::Written: return written(size());
    case Outcome::TooLarge:
    case Outcome::Rejected:
      if (size() > 1) return split(c.reason);
      return reject(0, reason((c.outcome == Outcome::TooLarge ? "too large for " : "refused by ") + destination + ": " +
                              c.reason));
    case Outcome::MaybeWritten: maybe_written(); [[fallthrough]];
    case Outcome::Retry: return resend({}, c);
    case Outcome::Fatal: {
      Classification prefixed = c;
      prefixed.reason = reason(c.reason);
      return fail(prefixed);
    }
  }
}

void Reply::written(size_t n) {
  if (!engine_.options().written_counter.empty()) engine_.count(engine_.options().written_counter.c_str(), n);
  job_->done_.written();
}

void Reply::maybe_written() { job_->done_.written(); }

void Reply::reject(size_t k, std::string reason) {
  engine_.count("rejected_records");
  job_->done_.reject(job_->record(item(k)), std::move(reason));
}

void Reply::fail(const Classification& c) { job_->done_.fail(c); }

void Reply::resend(const std::vector<size_t>& ks, const Classification& why) {
  const bool all = ks.empty() || ks.size() == size();
  const auto wait = budget_.next_delay(why);
  if (!wait || engine_.stopped()) {
    Classification failed = why;
    failed.reason = reason(why.reason);
    return fail(failed);
  }
  Run run{.items = {}, .variant = run_.variant};
  if (all) run.items = run_.items;
  else
    for (size_t k : ks) run.items.push_back(item(k));
  auto body = all ? body_ : engine_.render(*job_, run);
  engine_.count("resends");
  engine_.log(sdk::LogLevel::Debug, job_->context() + "resending " + std::to_string(run.items.size()) + " " +
                                        engine_.options().items + " in " + std::to_string(wait->count()) +
                                        " ms: " + why.reason);
  job_->done_.add(1);
  const bool holds_place = take_place();
  RequestEngine& engine = engine_;
  RequestEngine::Send send{job_, std::move(run), std::move(body), budget_};
  engine.resends_.after(*wait, [&engine, send = std::move(send), why, holds_place](bool go) mutable {
    if (go) return engine.resume(std::move(send), holds_place);
    Classification failed = why;
    failed.reason = send.job->context() + "stopping before a resend: " + engine.bounded(why.reason);
    engine.abandon(send, failed, holds_place);
  });
}

void Reply::send_again(const std::vector<size_t>& ks, uint32_t variant) {
  Run run{.items = {}, .variant = variant};
  for (size_t k : ks) run.items.push_back(item(k));
  if (run.items.empty()) return;
  job_->done_.add(1);
  auto body = engine_.render(*job_, run);
  std::vector<RequestEngine::Send> sends;
  sends.push_back({job_, std::move(run), std::move(body), engine_.fresh_budget()});
  engine_.dispatch(std::move(sends), true);
}

void Reply::split(std::string_view why) {
  if (size() < 2) return reject(0, reason(std::string(why)));
  engine_.count("splits");
  engine_.log(sdk::LogLevel::Debug, job_->context() + "splitting a request of " + std::to_string(size()) + " " +
                                        engine_.options().items + ": " + engine_.bounded(why));
  job_->done_.add(2);
  std::vector<RequestEngine::Send> sends;
  for (auto& half : halve(run_.items)) {
    Run run{.items = std::move(half), .variant = run_.variant};
    auto body = engine_.render(*job_, run);
    sends.push_back({job_, std::move(run), std::move(body), engine_.fresh_budget()});
  }
  engine_.dispatch(std::move(sends), true);
}

void Reply::resend_after(std::function<std::optional<Classification>()> task) {
  job_->done_.add(1);
  const bool holds_place = take_place();
  RequestEngine& engine = engine_;
  RequestEngine::Send send{job_, run_, body_, budget_};
  engine.resends_.after(std::chrono::milliseconds(0),
                        [&engine, send = std::move(send), task = std::move(task), holds_place](bool go) mutable {
                          std::optional<Classification> failed;
                          if (!go)
                            failed = Classification{.outcome = Outcome::Retry, .reason = "stopping before a resend"};
                          else {
                            try {
                              failed = task();
                            } catch (const sdk::FatalError& e) {
                              failed = Classification{.outcome = Outcome::Fatal, .reason = e.what()};
                            } catch (const std::exception& e) {
                              failed = Classification{.outcome = Outcome::Retry, .reason = e.what()};
                            }
                          }
                          if (!failed) return engine.resume(std::move(send), holds_place);
                          failed->reason = send.job->context() + engine.bounded(failed->reason);
                          engine.abandon(send, *failed, holds_place);
                        });
}

bool Reply::take_place() {
  if (!engine_.options().in_order || order_released_) return false;
  order_released_ = true;  // the resend will release it
  return true;
}

std::shared_ptr<Reply> Reply::hold() {
  held_ = true;
  return shared_from_this();
}

void Reply::release_order() {
  if (order_released_) return;
  order_released_ = true;
  if (engine_.options().in_order) engine_.next_in_order();
}

void Reply::finish() {
  if (finished_) return;
  finished_ = true;
  release_order();
  job_->done_.finish_one();
}

// ---------------------------------------------------------------- the engine

RequestEngine::RequestEngine(HttpClient& client, const OutcomeRules& rules, RequestEngineOptions options, Count count,
                             Log log)
    : client_(client), rules_(rules), options_(std::move(options)), count_(std::move(count)), log_(std::move(log)) {}

RequestEngine::~RequestEngine() { close(); }

RequestEngine::Count RequestEngine::host_count(const pmq_host_api* host) {
  // ABI 2.2 added count(); an older host has no counters.
  if (!host || host->struct_size < offsetof(pmq_host_api, count) + sizeof(host->count) || !host->count) return {};
  return [host](const char* name, uint64_t n) { host->count(host->host_ctx, name, n); };
}

RequestEngine::Log RequestEngine::host_log(const pmq_host_api* host) {
  if (!host || !host->log) return {};
  return [host](sdk::LogLevel level, const std::string& m) {
    host->log(host->host_ctx, static_cast<int32_t>(level), m.c_str());
  };
}

void RequestEngine::close() {
  stop();
  closed_ = true;
  tasks_.close();
}

void RequestEngine::stop() {
  stopped_ = true;
  resends_.close();  // resends still waiting complete their writes as retries, now
}

std::shared_ptr<const std::string> RequestEngine::render(const RequestJob& job, const Run& run) const {
  const Framing f = job.framing_for(run.variant);
  std::string out(f.open);
  for (size_t k = 0; k < run.items.size(); ++k) {
    if (k) out += f.between;
    job.render(run.items[k], out);
    out += f.after_each;
  }
  out += f.close;
  return std::make_shared<const std::string>(job.body(run, std::move(out)));
}

void RequestEngine::submit(const std::shared_ptr<RequestJob>& job, size_t count, std::vector<Run> runs) {
  std::vector<Send> sends = cut(job, {Segment{.first = 0, .count = count, .variant = 0}});
  for (Run& run : runs) {
    if (run.items.empty()) continue;
    auto body = render(*job, run);
    sends.push_back({job, std::move(run), std::move(body), fresh_budget()});
  }
  start(job, std::move(sends));
}

void RequestEngine::submit(const std::shared_ptr<RequestJob>& job, const std::vector<Segment>& segments) {
  start(job, cut(job, segments));
}

std::vector<RequestEngine::Send> RequestEngine::cut(const std::shared_ptr<RequestJob>& job,
                                                    const std::vector<Segment>& segments) const {
  std::vector<Send> sends;
  for (const Segment& segment : segments) {
    auto chunks = split_records(segment.first, segment.count, job->limits, job->framing_for(segment.variant),
                                [&](size_t i, std::string& out) { job->render(i, out); });
    for (Chunk& chunk : chunks) {
      Run run{.items = std::vector<size_t>(chunk.count), .variant = segment.variant};
      for (size_t k = 0; k < chunk.count; ++k) run.items[k] = chunk.first + k;
      auto body = std::make_shared<const std::string>(job->body(run, std::move(chunk.body)));
      sends.push_back({job, std::move(run), std::move(body), fresh_budget()});
    }
  }
  return sends;
}

void RequestEngine::start(const std::shared_ptr<RequestJob>& job, std::vector<Send> sends) {
  job->done_.add(sends.size());
  dispatch(std::move(sends), false);
  job->done_.finish_one();  // the job's own share: every request is on its way
}

void RequestEngine::resume(Send send, bool holds_place) {
  if (holds_place || !options_.in_order) return transmit(std::move(send));
  std::vector<Send> sends;
  sends.push_back(std::move(send));
  dispatch(std::move(sends), true);
}

void RequestEngine::dispatch(std::vector<Send> sends, bool first) {
  if (!options_.in_order) {
    for (Send& s : sends) transmit(std::move(s));
    return;
  }
  std::unique_lock lock(order_mutex_);
  queue_.insert(first ? queue_.begin() : queue_.end(), std::make_move_iterator(sends.begin()),
                std::make_move_iterator(sends.end()));
  if (busy_) return;
  send_next(std::move(lock));
}

void RequestEngine::next_in_order() { send_next(std::unique_lock(order_mutex_)); }

void RequestEngine::send_next(std::unique_lock<std::mutex> lock) {
  busy_ = !queue_.empty();
  if (!busy_) return;
  Send next = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  transmit(std::move(next));
}

void RequestEngine::abandon(const Send& send, const Classification& failed, bool holds_place) {
  send.job->done_.fail(failed);
  send.job->done_.finish_one();
  if (holds_place) next_in_order();
}

void RequestEngine::transmit(Send send) {
  count("requests");
  HttpRequest request = send.job->request(send.run);
  request.body = HttpBody::borrowed(*send.body);
  client_.send_async(std::move(request), [this, send = std::move(send)](HttpResponse response) mutable {
    respond(std::move(send), std::move(response));
  });
}

void RequestEngine::respond(Send send, HttpResponse response) {
  Classification c = rules_.classify(response);
  std::shared_ptr<Reply> reply(new Reply(*this, send.job, std::move(send.run), std::move(send.body), send.budget,
                                         std::move(response), std::move(c)));
  try {
    send.job->on_response(*reply);
  } catch (const std::exception& e) {
    reply->fail({.outcome = Outcome::Fatal, .reason = send.job->context() + "handling a response: " + e.what()});
    reply->held_ = false;
  }
  if (!reply->held_) reply->finish();
}

}  // namespace picomq::kit
