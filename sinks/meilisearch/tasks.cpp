#include "meilisearch/tasks.h"

#include <simdjson.h>

namespace picomq::meilisearch {

namespace {

TaskError read_error(simdjson::dom::object e) {
  TaskError out;
  std::string_view v;
  if (!e["code"].get_string().get(v)) out.code = v;
  if (!e["type"].get_string().get(v)) out.type = v;
  if (!e["message"].get_string().get(v)) out.message = v;
  return out;
}

}  // namespace

std::optional<uint64_t> task_uid(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  uint64_t uid = 0;
  if (parser.parse(body.data(), body.size()).get(root) || root["taskUid"].get_uint64().get(uid)) return std::nullopt;
  return uid;
}

TaskError error_of(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::object e;
  if (parser.parse(body.data(), body.size()).get_object().get(e)) return {};
  return read_error(e);
}

TaskState task_state(std::string_view body) {
  TaskState out;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root)) return out;
  std::string_view status;
  if (!root["status"].get_string().get(status)) out.status = status;
  simdjson::dom::object e;
  if (!root["error"].get_object().get(e)) out.error = read_error(e);
  return out;
}

std::optional<std::string> index_primary_key(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::string_view pk;
  if (parser.parse(body.data(), body.size()).get(root) || root["primaryKey"].get_string().get(pk)) return std::nullopt;
  return std::string(pk);
}

bool document_error(const std::string& code) {
  return code == "invalid_document_id" || code == "missing_document_id" || code == "invalid_document_geo_field" ||
         code == "document_fields_limit_reached" || code == "invalid_document_fields" ||
         code == "invalid_document_vectors_field" || code == "malformed_payload" || code == "bad_request";
}

TaskVerdict verdict(const TaskState& task) {
  if (task.status == "succeeded") return TaskVerdict::Written;
  if (task.status == "canceled") return TaskVerdict::Canceled;
  if (document_error(task.error.code)) return TaskVerdict::Bisect;
  if (task.error.type == "internal" || task.error.type == "system") return TaskVerdict::Resend;
  if (task.error.code == "index_not_found") return TaskVerdict::IndexGone;
  return TaskVerdict::Fatal;
}

}  // namespace picomq::meilisearch
