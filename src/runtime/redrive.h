#pragma once
// Redrive of a sink's dead letters (POST /sinks/{key}/dead-letters/redrive, `picomq-connect ctl
// dead-letters redrive`, docs/operations.md "Dead letters"). Each selected dead letter is rebuilt
// as the record it was (source topic, partition, offset, timestamp, key, headers, payload) and
// goes through the sink's definition as it is now — the block that reads its topic, its
// decoders, change events and transforms — to the sink:
//  - the dry run writes nothing and says, per dead letter, what would happen: written,
//    filtered, bad again (stage, reason), or read by no block;
//  - the redrive that writes runs beside the sink, in an instance of its plugin of its own, in
//    chunks. Its position is kept in Kafka, in a consumer group of its own
//    (picomq-connect-redrive-<sink>-<id>) that commits the dead-letter topic's offsets after each
//    chunk is written, with the redrive's selection in the commit's metadata: a redrive cut by a
//    crash or a stop resumes from there (a chunk cut half-way is written again, which a sink that
//    is idempotent by record id or key absorbs). A record that is bad again is dead-lettered
//    again with pico_error_redrive (this redrive's id) and pico_error_history (the failures
//    before), past the redrive's end: never read by it again, never looped.
// Only a sink that declares it takes redrives (ABI 2.9 takes_redrives) is redriven into.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/runtime_config.h"
#include "config/sink_definition.h"
#include "runtime/kafka/dead_letter_reader.h"

namespace picomq::runtime {

// The dry run over a page of the sink's dead letters in `dead_letter_topic` (filter, cursor and
// limit as GET /sinks/{key}/dead-letters takes them), as the API's JSON:
// {"topic", "dry_run": true, "scanned", "next_cursor", "summary": {"write", "bad", "filtered",
// "no_block"}, "records": [{"id", "source", "was": {"stage", "reason"}, "outcome", "stage",
// "reason"}]}. Empty with `error` when the topic cannot be read.
std::string redrive_dry_run(const config::SinkDefinition& definition, const config::RuntimeConfig& runtime_config,
                            const std::string& bootstrap_servers, const std::string& dead_letter_topic,
                            const kafka::DeadLetterFilter& filter, const std::string& cursor, size_t limit,
                            std::string& error);

struct RedriveRequest {
  std::string dead_letter_topic;
  kafka::DeadLetterFilter filter;  // which dead letters (its `sink` is the sink's key)
  std::string resume;              // a redrive's id: go on with it, its selection as it was
  size_t chunk = 500;              // dead letters written per chunk (and per group commit)
  // A sink with change events is redriven into only when the caller says so: a redriven change is
  // applied after the newer changes of its key, and overwrites them in a sink without versions.
  bool apply_changes = false;
};

// One redrive that writes, in a thread of its own from start() until it is done, failed or
// stopped.
class Redrive {
 public:
  // Checks what can be refused at once (a sink that does not take redrives, a resume of an
  // unknown id, a topic that cannot be read) and starts. Null with `error` and the HTTP status
  // that fits (400, 404, 409, 502) otherwise.
  static std::shared_ptr<Redrive> start(const config::SinkDefinition& definition,
                                        const config::RuntimeConfig& runtime_config,
                                        const std::string& bootstrap_servers, RedriveRequest request,
                                        std::string& error, int& status);
  ~Redrive();
  Redrive(const Redrive&) = delete;
  Redrive& operator=(const Redrive&) = delete;

  const std::string& id() const { return id_; }
  const std::string& sink() const { return definition_.key; }
  // {"id", "sink", "state": running | done | failed | stopped, "group", "topic", "selection",
  //  "started_at", "finished_at", "scanned", "selected", "written", "bad_again", "filtered",
  //  "no_block", "duplicates", "superseded", "chunks", "position", "end", "error"}
  std::string progress_json() const;
  bool running() const { return state_.load() == State::Running; }
  // Ends after the chunk being written (its commit included); resumable.
  void stop();
  void join();

  // The consumer group that keeps a redrive's position.
  static std::string group_of(const std::string& sink_key, const std::string& id) {
    return "picomq-connect-redrive-" + sink_key + "-" + id;
  }

 private:
  enum class State { Running, Done, Failed, Stopped };
  Redrive(config::SinkDefinition definition, const config::RuntimeConfig& runtime_config, std::string bootstrap_servers,
          RedriveRequest request);
  void run();
  void finish(State state, const std::string& error = {});

  config::SinkDefinition definition_;
  const config::RuntimeConfig& runtime_config_;
  std::string bootstrap_servers_;
  RedriveRequest request_;
  std::string id_;
  std::map<int32_t, int64_t> start_;  // where it starts (a resume: the committed positions)

  std::atomic<State> state_{State::Running};
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;  // the progress below
  std::string error_;
  std::string position_;  // the cursor committed last
  int64_t started_ms_ = 0, finished_ms_ = -1;
  int64_t scanned_ = 0, selected_ = 0, written_ = 0, bad_again_ = 0, filtered_ = 0, no_block_ = 0, duplicates_ = 0,
          superseded_ = 0, chunks_ = 0;
  std::thread thread_;
};

// The redrives of a sink that Kafka knows, whichever runtime ran them: each consumer group
// picomq-connect-redrive-<sink>-<id> with a position on `dead_letter_topic`, as JSON objects
// {"id", "sink", "state": "interrupted" | "done", "group", "topic", "selection", "position",
// "end"} ("interrupted": its position is short of its end; {"resume": id} goes on with it).
std::vector<std::string> redrives_in_kafka(const std::string& bootstrap_servers,
                                           const config::RuntimeConfig& runtime_config, const std::string& sink_key,
                                           const std::string& dead_letter_topic, std::string& error);

// The selection of a redrive as kept in its group's commit metadata, and back.
std::string redrive_selection_json(const RedriveRequest& request);
bool parse_redrive_selection(const std::string& text, RedriveRequest& request, std::string& error);

}  // namespace picomq::runtime
