#pragma once
// `picomq-connect --health URL`: one GET of the operations API's health endpoint, for probes
// that run inside the process's own image (the container HEALTHCHECK: the image has no curl).
#include <string>

namespace picomq::runtime {

// GETs `url` (http:// or https://, certificate not verified: the probe asks its own process),
// with `Authorization: Bearer <token>` when token is not empty. Returns 0 on a 200, else 1, and
// writes one line saying what answered (or why nothing did) to stderr.
int probe_health(const std::string& url, const std::string& token);

}  // namespace picomq::runtime
