#!/usr/bin/env bash
# The quickstart with the operations API on, on its embedded broker: the lag read from the broker
# (GET /sinks group_lag, `picomq-connect ctl lag`) shows every sample record committed soon after
# the sink commits them — a reading taken before the first commit is not kept for 5 s
# (LagMonitor::kAfterCommit).
set -euo pipefail
bin="$1"; config="$2"; plugins="$3"
dir="$(mktemp -d)"
# The runtime is waited for before its folder goes: stopping, it writes its status file once more
# (an rm racing that write failed the test: "Directory not empty").
trap 'kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
cp -r "$(dirname "$config")"/. "$dir"/
sed -i "s#path = \[.*#path = [\"$plugins\"]#" "$dir/runtime.toml"
printf '\n[api]\nenabled = true\nlisten = "127.0.0.1:0"\n' >> "$dir/runtime.toml"
sed -i "s#^\[runtime\]#[runtime]\nstatus_file = \"$dir/status.json\"#" "$dir/runtime.toml"
start=$(date +%s%N)
"$bin" --config "$dir/runtime.toml" --stop-after 20s > "$dir/out" 2> "$dir/err" &
pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runtime"]["api"])' "$dir/status.json" 2>/dev/null || true)"
  [[ -n "$url" ]] && break
  sleep 0.1
done
[[ -n "$url" ]] || { echo "no API URL in the status file"; cat "$dir/err"; exit 1; }
for _ in $(seq 1 100); do
  # Before the sink exists or the first reading, the answer has no lag yet: asked again.
  committed="$("$bin" ctl --url "$url" --json lag orders_stdout | python3 -c '
import json, sys
doc = json.load(sys.stdin)
print(sum(p["committed"] or 0 for b in doc[0]["group_lag"] or [] for p in b))' 2>/dev/null || true)"
  [[ "$committed" == 10 ]] && break
  sleep 0.1
done
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[[ "$committed" == 10 ]] || { echo "the lag never showed the 10 records committed"; "$bin" ctl --url "$url" lag; exit 1; }
"$bin" ctl --url "$url" lag
echo "every record shown committed ${elapsed_ms} ms after the start"
(( elapsed_ms < 3500 )) || { echo "too late: a reading from before the first commit was kept"; exit 1; }
