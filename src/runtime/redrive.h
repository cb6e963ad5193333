#pragma once
// Redrive of a sink's dead letters, its first part: the dry run (POST /sinks/{key}/dead-letters/
// redrive with "dry_run": true, `picomq-connect ctl dead-letters redrive --dry-run`). Each
// matching dead letter is rebuilt as the record it was (source topic, partition, offset,
// timestamp, key, headers, payload) and prepared with the sink's definition as it is now — the
// block that reads its topic, its decoders, change events and transforms, as the runtime would —
// and nothing is written: after a fix it shows which would now go to the sink, which a filter
// would drop, and which would be bad again, at which stage and why. The redrive that writes comes
// next (docs/operations.md, "Dead letters").
#include <string>
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

}  // namespace picomq::runtime
