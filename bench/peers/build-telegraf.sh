#!/usr/bin/env bash
# Builds Telegraf 1.37.2 (the InfluxDB sink benchmark's peer) once per machine, from the Go module
# proxy, with only the plugins the peer uses (build tags: custom, inputs.kafka_consumer,
# parsers.json, serializers.influx, outputs.influxdb, outputs.influxdb_v2, outputs.file; with
# `custom` a parser is compiled in only when named), into a cache outside the clone:
#   ${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/telegraf-1.37.2/telegraf
# `go build` inside a writable copy of the module. Prints the binary's path. Idempotent. Not called
# by scripts/setup.sh: only `BENCH_PEER=1 BENCH_SINK=influxdb bash bench/sink_bench.sh` needs it.
set -euo pipefail
version=1.37.2
cache="${PICOMQ_SERVER_CACHE:-$HOME/.cache/picomq/servers}/telegraf-$version"
bin="$cache/telegraf"
tags="custom,inputs.kafka_consumer,parsers.json,serializers.influx,serializers.json,outputs.influxdb,outputs.influxdb_v2,outputs.file,outputs.http,outputs.elasticsearch,outputs.opensearch,outputs.postgresql"
built() { [[ -x "$bin" && "$(cat "$cache/tags" 2>/dev/null)" == "$tags" ]] && "$bin" --version >/dev/null 2>&1; }
if built; then echo "$bin"; exit 0; fi
command -v go >/dev/null || { echo "telegraf: go is not installed" >&2; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if built; then echo "$bin"; exit 0; fi
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
echo "telegraf: building github.com/influxdata/telegraf@v$version into $bin (once per machine)" >&2
dir="$(go mod download -json "github.com/influxdata/telegraf@v$version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
(cd "$work/src" && nice -n 10 go build -tags "$tags" -o "$work/telegraf" ./cmd/telegraf) >&2
"$work/telegraf" --version >/dev/null
mv "$work/telegraf" "$bin"
echo "$tags" > "$cache/tags"
echo "$bin"
