#!/usr/bin/env bash
# Benchmark: the same records through a Python sink that only counts (bench/python/counting_sinks.py),
# on each plane (rows, batches, arrow), next to the C++ counting sink of the same plane
# (bench/planes.sh's libpicomq_connector_bench_<plane>_sink), reading one topic of a real
# single-node Kafka broker, R rounds. Prints records/s (wall, start to the last commit) and records
# per CPU-second of the runtime process. See bench/README.md. Not a test: ctest does not run it.
#
# Environment: BENCH_RECORDS=1000000, BENCH_RUNS=1, BENCH_SKIP_BUILD=0, BENCH_BATCH_LENGTH=1000,
# BENCH_PLANES="rows batches arrow" (a subset to run), BENCH_KEEP=0, BENCH_DIR= (as bench/planes.sh). Smoke mode for CI: BENCH_RECORDS=20000.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N="${BENCH_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-1}"
SKIP_BUILD="${BENCH_SKIP_BUILD:-0}"
BATCH_LENGTH="${BENCH_BATCH_LENGTH:-1000}"
KEEP="${BENCH_KEEP:-0}"
TOPIC="bench.python"
read -r -a PLANES <<< "${BENCH_PLANES:-rows batches arrow}"
bench_require_positive BENCH_RECORDS "$N"
bench_require_positive BENCH_RUNS "$RUNS"
bench_require_positive BENCH_BATCH_LENGTH "$BATCH_LENGTH"
bench_init_workdir picomq-bench-python "$KEEP"

bench_build "$SKIP_BUILD"
[[ -x "$bin" && -f "$plugins/libpicomq_connector_python_sink.so" ]] ||
  { echo "no build of picomq-connect and libpicomq_connector_python_sink in $repo/build" >&2; exit 2; }
venv="$repo/tools/venv"
[[ -x "$venv/bin/python" ]] || { echo "no $venv (run scripts/setup.sh): the Arrow sink needs pyarrow" >&2; exit 2; }
bench_require_kcat
bench_compile_helper
bench_start_kafka
bench_create_topic "$TOPIC" 1
bench_produce_records "$TOPIC" "$N"
rm -f "$records_file"

results="$work/results.txt"
: > "$results"
declare -A python_class=([rows]=CountingRows [batches]=CountingBatches [arrow]=CountingArrow)

run_one() {  # <round> <python|cpp> <plane>
  local run="$1" lang="$2" plane="$3" dir="$work/$2-$3-r$1"
  local group="picomq-connect-sink-bench-python-$lang-$plane-r$run" report="$dir/report.txt" config
  if [[ "$lang" == python ]]; then
    config="class = \"counting_sinks:${python_class[$plane]}\"
python_path = [\"$repo/bench/python\"]
virtualenv = \"$venv\"
max_in_flight = 4
options = { report = \"$report\" }"
    bench_write_sink_configs "$dir" libpicomq_connector_python_sink "$group" "$TOPIC" "$BATCH_LENGTH" "$config"
  else
    bench_write_sink_configs "$dir" "libpicomq_connector_bench_${plane}_sink" "$group" "$TOPIC" "$BATCH_LENGTH" \
      "report_path = \"$report\""
  fi
  bench_run_sink "$dir" "$group" "$TOPIC" "$N" "$lang-$plane" "$run"
  local line
  line="$(cat "$report" 2>/dev/null || true)"
  [[ "$line" =~ ^records=([0-9]+) ]] && [[ "${BASH_REMATCH[1]}" == "$N" ]] ||
    { echo "$lang $plane run $run: the sink reported '$line', not records=$N" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
  echo "lang=$lang plane=$plane run=$run $sink_result" >> "$results"
  log "$lang $plane run $run: $sink_result"
}

log "warm-up read (untimed; the group coordinator settles meanwhile)"
kcat -C -b "$bootstrap" -t "$TOPIC" -o beginning -e -q -f '%s\n' > /dev/null

for ((r = 1; r <= RUNS; r++)); do
  for plane in "${PLANES[@]}"; do
    run_one "$r" python "$plane"
    run_one "$r" cpp "$plane"
  done
done

python3 - "$results" "$N" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import re, statistics, sys
path, n, load = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for line in open(path):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    wall, joined, cpu = float(f["wall_s"]), float(f["join_s"]), float(f["user_s"]) + float(f["sys_s"])
    rows.setdefault((f["lang"], f["plane"]), []).append((n / wall, n / (wall - joined), n / cpu if cpu else float("inf")))
print(f"{n} records, load average before the report {load}")
print("rec/s: start of the process to the last commit; after join: from the group join (interpreter and pyarrow")
print("start-up excluded); rec/CPU-s: the runtime process's user+sys CPU, start-up included")
print("| plane | Python rec/s | Python rec/s after join | Python rec/CPU-s | C++ rec/s | C++ rec/s after join | C++ rec/CPU-s |")
print("|---|---:|---:|---:|---:|---:|---:|")
for plane in ("rows", "batches", "arrow"):
    cells = []
    for lang in ("python", "cpp"):
        got = rows.get((lang, plane), [])
        cells += [f"{statistics.median(r[i] for r in got):,.0f}" for i in range(3)] if got else ["-"] * 3
    print(f"| {plane} | " + " | ".join(cells) + " |")
PY
