#pragma once
// What Doris answers, read without I/O: a Stream Load's JSON answer, the refusals that no resend
// can cure, and get_load_state's answer.
#include <cstdint>
#include <string>

#include "picomq/kit/http_client.hpp"

namespace picomq::doris {

// What a Stream Load answered.
struct Answer {
  std::string status, message, existing, error_url;
  int64_t txn_id = -1, filtered = 0;
};

// A Stream Load's answer (the BE's, or the FE's own refusal); empty fields where the body is not
// such an answer.
Answer parse_answer(const std::string& body);

// Whether a load's failure message names something a resend cannot cure (an unknown table, a
// refused credential, a bad json path...).
bool fatal_message(const std::string& message);

// get_load_state's answer: true with the label's `state`, else false with the `error`.
bool parse_load_state(const kit::HttpResponse& r, std::string& state, std::string& error);

}  // namespace picomq::doris
