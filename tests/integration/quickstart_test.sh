#!/usr/bin/env bash
# The quickstart on the embedded broker: its ten sample orders come out of the stdout sink as
# JSON lines with the metadata fields; a record produced with kcat to the address it prints
# comes out too; the process stops cleanly (exit 0).
set -euo pipefail
bin="$1"; config="$2"
out="$(mktemp)"; err="$(mktemp)"
trap 'rm -f "$out" "$err"' EXIT
"$bin" --config "$config" --stop-after 10s > "$out" 2> "$err" &
pid=$!
for _ in $(seq 1 100); do
  addr="$(grep -o 'embedded broker listening on [0-9.:]*' "$err" | awk '{print $5}' || true)"
  [[ -n "$addr" ]] && break
  sleep 0.1
done
[[ -n "$addr" ]] || { echo "no listening address in the log"; cat "$err"; exit 1; }
echo '{"order_id":"eu-2001","amount":12.5}' | kcat -b "$addr" -t orders.eu -P
wait "$pid" || { echo "quickstart exited $?"; cat "$err"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 11, f"expected 10 sample records and 1 from kcat, got {len(lines)}"
assert any(l["payload"]["order_id"] == "eu-2001" for l in lines), "the record produced with kcat"
topics = sorted({l["pico_topic"] for l in lines})
assert topics == ["orders.eu", "orders.us"], topics
for l in lines:
    assert l["pico_partition"] == 0 and isinstance(l["pico_offset"], int) and l["pico_timestamp"] > 0, l
    assert l["payload"]["order_id"].startswith(l["pico_topic"].split(".")[1] + "-"), l
print("quickstart: 10 sample records and 1 from kcat, from orders.eu and orders.us")
PY
