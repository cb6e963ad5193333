#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, then the integration tests against a real
# Apache Kafka broker (KRaft) that the tests start and stop themselves.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
cd "$here/build"
ctest --output-on-failure --timeout 1800 "$@"
