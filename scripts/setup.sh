#!/usr/bin/env bash
# Installs everything picomq-connect needs to build and test on a fresh Debian 12 machine.
# Idempotent: re-running it only checks what is already there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

debian_packages=(
  build-essential cmake ninja-build pkg-config
  librdkafka-dev kcat libtomlplusplus-dev libsimdjson-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev nlohmann-json3-dev libjemalloc-dev
  openjdk-17-jre-headless maven python3
)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Apache Kafka (KRaft) for the integration tests: the broker's jars from Maven Central.
"$here/tools/kafka/fetch-kafka.sh"
echo "setup: ok"
