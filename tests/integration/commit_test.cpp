// Commit after the write: retries, the Error state, shutdown flush.
#include <gtest/gtest.h>

#include "harness.h"

namespace picomq::test {
namespace {
}  // namespace
}  // namespace picomq::test
