#pragma once
// The Meilisearch sink's reading of Meilisearch's answers: an index's primary key, the task uid of
// an enqueued request, the error object of a refused one, a task's state from GET /tasks/{uid}, and
// what a finished task means for its documents. No I/O.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace picomq::meilisearch {

// An error object: {"code", "type", "message"} (empty strings when absent).
struct TaskError {
  std::string code, type, message;
};

struct TaskState {
  std::string status;  // enqueued, processing, succeeded, failed, canceled; empty: not readable
  TaskError error;
  bool finished() const { return !status.empty() && status != "enqueued" && status != "processing"; }
};

// The taskUid of a 202 answer; nullopt when it has none.
std::optional<uint64_t> task_uid(std::string_view body);
// The error object of a refused request's answer ({} when the body is not one).
TaskError error_of(std::string_view body);
// A GET /tasks/{uid} answer.
TaskState task_state(std::string_view body);

// The primaryKey of a GET /indexes/{uid} answer; nullopt when it has none (not set yet).
std::optional<std::string> index_primary_key(std::string_view body);

// Whether a task or request failed on its documents (a bisection finds the ones Meilisearch
// refuses) rather than on the request, the index or the server.
bool document_error(const std::string& code);

enum class TaskVerdict {
  Written,    // succeeded: its documents are in
  Canceled,   // canceled: nothing written, retry
  Bisect,     // failed on a document: halve down to the refused ones
  Resend,     // failed as internal / system: send it again
  IndexGone,  // index_not_found: prepare the index again, retry
  Fatal,      // any other failure: configuration or a server refusing for good
};
// Only for a finished task. A failed task is atomic: nothing of it was written.
TaskVerdict verdict(const TaskState& task);

}  // namespace picomq::meilisearch
