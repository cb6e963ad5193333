// Shared by the decoder fuzz targets: what every decoded payload must be.
#pragma once
#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "decoders/schema_decoder.h"

namespace picomq::fuzz {

[[noreturn]] inline void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

// Output of a successful decode: one complete JSON value, valid UTF-8.
inline void check_json(const std::string& out) {
  static simdjson::dom::parser parser;
  auto doc = parser.parse(out.data(), out.size());
  if (doc.error())
    die("decoder output is not valid JSON", std::string(simdjson::error_message(doc.error())) + ": " + out);
}

// A failure says what failed, prefixed with the decoder's name, and never asks for a retry
// (there is no registry here).
inline void check_failure(decoders::Status status, const std::string& error, const char* prefix) {
  if (status == decoders::Status::retry) die("retry without a registry", error);
  if (error.rfind(prefix, 0) != 0) die("error without its decoder prefix", error);
}

}  // namespace picomq::fuzz
