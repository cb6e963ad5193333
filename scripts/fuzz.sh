#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build-asan-ubsan/: the tree scripts/sanitize.sh
# builds its ASan+UBSan check in) and runs each for
# FUZZ_SECONDS (default 15: the CI smoke; a real session is e.g. FUZZ_SECONDS=1800) on a
# scratch copy of its seed corpus. Exits non-zero when a target finds a crash; the crashing
# input is kept in build-asan-ubsan/artifacts/. Targets and corpora: fuzz/README.md.
# FUZZ_CORPUS_DIR=<dir> (long sessions, over several days): each target's corpus lives in
# <dir>/<target> and grows from session to session (the seeds read alongside), and
# <dir>/sessions.tsv gets a line per target run: date, target, seconds, executions, coverage
# (libFuzzer's cov and ft), corpus size, CPU seconds (the fuzzer's user + system time: under
# `nice` beside other work it gets less than its wall seconds) — the CPU-hours and coverage
# figures of fuzz/README.md.
#   FUZZ_SECONDS=3600 FUZZ_CORPUS_DIR=~/.cache/picomq/fuzz bash scripts/fuzz.sh [target...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${FUZZ_SECONDS:-15}"
build="$here/build-asan-ubsan"  # shared with scripts/sanitize.sh's ASan+UBSan check: one cold build
source "$here/scripts/compiler-cache.sh"  # compiler_launcher: through ccache (the build was cold in every clone)
source "$here/scripts/sanitizer-build.sh"  # sanitizer_configure: clang, OSS-Fuzz's -O1 and line tables

mkdir -p "$build"
sanitizer_configure "$build" address,undefined >"$build/fuzz-configure.log" 2>&1 || { cat "$build/fuzz-configure.log" >&2; exit 1; }
targets=(fuzz_transform_config fuzz_transform_apply fuzz_destination_template
         fuzz_decoder_json fuzz_decoder_text fuzz_decoder_proto fuzz_decoder_flatbuffer fuzz_decoder_avro)
(($#)) && targets=("$@")
corpora="${FUZZ_CORPUS_DIR:-}"
cmake --build "$build" --target "${targets[@]}"

mkdir -p "$build/artifacts"
for target in "${targets[@]}"; do
  bin="$(find "$build/fuzz" -type f -name "$target" -perm -u+x | head -1)"
  [[ -n "$bin" ]] || { echo "fuzz: $target was not built" >&2; exit 1; }
  case "$target" in
    fuzz_transform_*) seeds="$here/fuzz/transforms/corpus_${target#fuzz_transform_}" ;;
    fuzz_decoder_*)   seeds="$here/fuzz/decoders/corpus_${target#fuzz_decoder_}" ;;
    fuzz_destination_template) seeds="$here/fuzz/destination/corpus_template" ;;
  esac
  if [[ -n "$corpora" ]]; then scratch="$corpora/$target"; mkdir -p "$scratch"; else scratch="$(mktemp -d)"; fi
  extra=()
  [[ "$target" == fuzz_transform_config ]] && extra=(-dict="$here/fuzz/transforms/transforms.dict")
  echo "fuzz: $target for ${seconds}s (seeds: ${seeds#"$here"/})"
  status=0
  started=$SECONDS
  times >"$build/$target.cpu-before"  # the shell's children's CPU so far (a builtin: no subshell)
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$target-" "${extra[@]}" "$scratch" "$seeds" >"$build/$target.log" 2>&1 || status=$?
  # The sanitizer's and libFuzzer's own reports (`==<pid>==ERROR: ...`), not the targets' libraries' logging
  # (libprotobuf logs an ERROR line per invalid string: hundreds of thousands per run).
  grep -E "^stat::number_of_executed_units|^SUMMARY|^==[0-9]+== ?ERROR" "$build/$target.log" || true
  times >"$build/$target.cpu-after"
  cpu_seconds=$(cat "$build/$target.cpu-before" "$build/$target.cpu-after" | awk '
    function secs(t) { split(t, p, "m"); sub("s", "", p[2]); return p[1] * 60 + p[2] }
    NR == 2 { before = secs($1) + secs($2) } NR == 4 { after = secs($1) + secs($2) }
    END { printf "%d", after - before }')
  if [[ -n "$corpora" ]]; then
    last=$(grep -E "^#[0-9]+.*cov: " "$build/$target.log" | tail -1)
    # The seconds it ran (a finding ends it early), not the ones it was given.
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" "$((SECONDS - started))" \
      "$(grep -oP '^stat::number_of_executed_units: \K[0-9]+' "$build/$target.log" || echo 0)" \
      "$(grep -oP 'cov: \K[0-9]+' <<<"$last" || echo 0)" "$(grep -oP 'ft: \K[0-9]+' <<<"$last" || echo 0)" \
      "$(find "$scratch" -type f | wc -l)" "$cpu_seconds" >>"$corpora/sessions.tsv"
  else
    rm -rf "$scratch"
  fi
  if ((status != 0)); then echo "fuzz: $target FAILED (exit $status); input in $build/artifacts/" >&2; exit 1; fi
done
echo "fuzz: ok"
