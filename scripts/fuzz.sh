#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build-asan-ubsan/: the tree scripts/sanitize.sh
# builds its ASan+UBSan check in) and runs each for
# FUZZ_SECONDS (default 15: the CI smoke; a real session is e.g. FUZZ_SECONDS=1800) on a
# scratch copy of its seed corpus. Exits non-zero when a target finds a crash; the crashing
# input is kept in build-asan-ubsan/artifacts/. Targets and corpora: fuzz/README.md.
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
  scratch="$(mktemp -d)"
  extra=()
  [[ "$target" == fuzz_transform_config ]] && extra=(-dict="$here/fuzz/transforms/transforms.dict")
  echo "fuzz: $target for ${seconds}s (seeds: ${seeds#"$here"/})"
  status=0
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$target-" "${extra[@]}" "$scratch" "$seeds" >"$build/$target.log" 2>&1 || status=$?
  grep -E "^stat::number_of_executed_units|SUMMARY|ERROR" "$build/$target.log" || true
  rm -rf "$scratch"
  if ((status != 0)); then echo "fuzz: $target FAILED (exit $status); input in $build/artifacts/" >&2; exit 1; fi
done
echo "fuzz: ok"
