#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, then the integration tests against a real
# Apache Kafka broker (KRaft) that the tests start and stop themselves. The suites that wait on
# servers run side by side (PICOMQ_TEST_JOBS, default 3: each starts its own broker and servers on
# free loopback ports); `bash scripts/test.sh -j1` runs them one after another.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
cd "$here/build"
ctest --output-on-failure --timeout 1800 -j "${PICOMQ_TEST_JOBS:-3}" "$@"
