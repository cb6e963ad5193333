#!/usr/bin/env bash
# The quickstart on the embedded broker: its ten sample orders come out of the stdout sink as
# JSON lines with the metadata fields, and the process stops cleanly (exit 0).
set -euo pipefail
bin="$1"; config="$2"
out="$(mktemp)"; err="$(mktemp)"
trap 'rm -f "$out" "$err"' EXIT
"$bin" --config "$config" --stop-after 8s > "$out" 2> "$err" || { echo "quickstart exited $?"; cat "$err"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 10, f"expected 10 records, got {len(lines)}"
topics = sorted({l["pico_topic"] for l in lines})
assert topics == ["orders.eu", "orders.us"], topics
for l in lines:
    assert l["pico_partition"] == 0 and isinstance(l["pico_offset"], int) and l["pico_timestamp"] > 0, l
    assert l["payload"]["order_id"].startswith(l["pico_topic"].split(".")[1] + "-"), l
print("quickstart: 10 records from orders.eu and orders.us")
PY
grep -q "embedded broker listening on 127.0.0.1:" "$err" || { echo "no listening address in the log"; cat "$err"; exit 1; }
