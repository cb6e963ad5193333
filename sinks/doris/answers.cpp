#include "doris/answers.h"

#include <simdjson.h>

namespace picomq::doris {

Answer parse_answer(const std::string& body) {
  Answer a;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body).get(root) || root.type() != simdjson::dom::element_type::OBJECT) return a;
  std::string_view v;
  if (!root["Status"].get_string().get(v)) a.status = v;
  else if (!root["status"].get_string().get(v)) a.status = v;  // the FE's own refusals
  if (!root["Message"].get_string().get(v)) a.message = v;
  else if (!root["msg"].get_string().get(v)) a.message = v;
  if (!root["ExistingJobStatus"].get_string().get(v)) a.existing = v;
  if (!root["ErrorURL"].get_string().get(v)) a.error_url = v;
  int64_t n = 0;
  if (!root["TxnId"].get_int64().get(n)) a.txn_id = n;
  if (!root["NumberFilteredRows"].get_int64().get(n)) a.filtered = n;
  return a;
}

bool fatal_message(const std::string& m) {
  for (const char* s :
       {"Unknown table", "Unknown database", "ANALYSIS_ERROR", "INVALID_ARGUMENT", "Access denied", "denied",
        "NOT_AUTHORIZED", "There is no 100-continue header", "Invalid json path", "Label format error"})
    if (m.find(s) != std::string::npos) return true;
  return false;
}

bool parse_load_state(const kit::HttpResponse& r, std::string& state, std::string& error) {
  if (!r.completed() || r.status >= 500) {
    error = r.completed() ? "HTTP " + std::to_string(r.status) : "no answer";
    return false;
  }
  if (r.status == 401 || r.status == 403) {
    error = "HTTP " + std::to_string(r.status) + " (check user and password)";
    return false;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::string_view v;
  int64_t code = -1;
  if (r.status != 200 || parser.parse(r.body).get(root) || root["code"].get_int64().get(code) || code != 0 ||
      root["data"].get_string().get(v)) {
    error = "HTTP " + std::to_string(r.status) + ": " + r.body_excerpt(200);
    return false;
  }
  state = std::string(v);
  return true;
}

}  // namespace picomq::doris
