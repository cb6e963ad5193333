#pragma once
// A random token of 16 hex digits, for names a writer must not share with any other run (an S3
// upload's marker, a Redshift load's staged files): a key written once never has two contents.
#include <cstdio>
#include <random>
#include <string>

namespace picomq::kit {

inline std::string random_token() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  char token[17];
  std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(random()));
  return token;
}

}  // namespace picomq::kit
