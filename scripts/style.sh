#!/usr/bin/env bash
# The style check (.ci/run): the Rust workspace with rustfmt (rustfmt.toml) and clippy
# (-D warnings) whole; every C and C++ file of the tree with clang-format (.clang-format, 120
# columns; the tree was formatted once, in the commit listed in .git-blame-ignore-revs); the .cpp /
# .c files added or changed since the style baseline (.style-baseline, a commit) with clang-tidy
# (.clang-tidy, each disabled check with its reason), on build/'s compile database (~15 s a file:
# the whole tree would be hours on 2 cores), skipping those that passed before with the same
# headers and flags (scripts/tidy_cache.py). A file older than the baseline is brought to
# clang-tidy's checks when it is next touched.
#
#   bash scripts/style.sh            # needs a configured build/ (scripts/build.sh) for clang-tidy
#   STYLE_BASE=<commit> bash scripts/style.sh   # another baseline for clang-tidy, e.g. main~10
#   clang-format -i <file>           # fixes a file's format
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
failed=0

# clang-tidy on one `<source>\t<pass file>` line (scripts/tidy_cache.py), on the compile database in
# $DB; prints the findings and fails, or records the pass.
tidy_one() {
  local file="${1%%$'\t'*}" pass="${1#*$'\t'}" out
  out="$(clang-tidy --quiet -p "$DB" "$file" 2>/dev/null)" || { printf '%s\nstyle: clang-tidy: %s\n' "$out" "$file" >&2; return 1; }
  if [[ -n "$pass" ]]; then : >"$pass"; fi
}
export -f tidy_one

echo "style: rustfmt"
cargo fmt --all -- --check || { echo "style: rustfmt wants changes (cargo fmt --all)" >&2; failed=1; }
echo "style: clippy"
# build/ compiles the workspace's crates through clippy-driver (PICOMQ_CARGO_CLIPPY,
# cmake/PicomqCargo.cmake): its cargo steps, run again, do nothing but replay the warnings of that
# one compilation, and any warning fails the check, as `-D warnings` would. Without such a build,
# `cargo clippy` in the same release profile and target directory (the build scripts and proc
# macros shared).
if grep -q '^PICOMQ_CARGO_CLIPPY:BOOL=ON' build/CMakeCache.txt 2>/dev/null; then
  clippy_log="$(mktemp -t picomq-clippy.XXXXXX)"
  if ! cmake --build build --target picomq_rust_workspace >"$clippy_log" 2>&1; then
    cat "$clippy_log" >&2; echo "style: the Rust workspace does not build" >&2; failed=1
  elif grep -qE '^(warning|error)(\[|:)' "$clippy_log"; then
    grep -vE '^\[[0-9]+/[0-9]+\]|^ *(Compiling|Finished|Fresh|Executable) ' "$clippy_log" >&2
    echo "style: clippy found problems" >&2; failed=1
  fi
  rm -f "$clippy_log"
else
  CARGO_TARGET_DIR="${PICOMQ_CARGO_TARGET:-$HOME/.cache/picomq/cargo-target}" \
    cargo clippy --release --workspace --all-targets --offline --quiet -- -D warnings || { echo "style: clippy found problems" >&2; failed=1; }
fi

mapfile -t tree < <(git ls-files '*.c' '*.cpp' '*.h' '*.hpp' | grep -v '^fuzz/.*/corpus/' || true)
echo "style: clang-format on the ${#tree[@]} C/C++ files of the tree"
printf '%s\0' "${tree[@]}" | xargs -0 -n 64 -P "$(nproc)" clang-format --dry-run --Werror ||
  { echo "style: clang-format wants changes (clang-format -i <file>)" >&2; failed=1; }

base="${STYLE_BASE:-$(cat .style-baseline)}"
mapfile -t files < <(git diff --name-only --diff-filter=AMR "$base" -- '*.c' '*.cpp' '*.h' '*.hpp' | grep -v '^fuzz/.*/corpus/' || true)
echo "style: clang-tidy on the C/C++ files changed since ${base:0:12} (${#files[@]})"
if ((${#files[@]})); then
  mapfile -t sources < <(printf '%s\n' "${files[@]}" | grep -E '\.(c|cpp)$' || true)
  if ((${#sources[@]})); then
    [[ -f build/compile_commands.json ]] || { echo "style: build/compile_commands.json is missing (scripts/build.sh)" >&2; exit 1; }
    # GCC-only flags clang does not know, out of a copy of the compile database.
    db="$(mktemp -d -t picomq-tidy.XXXXXX)"
    trap 'rm -rf "$db"' EXIT
    sed 's/ -fno-gnu-unique//g' build/compile_commands.json > "$db/compile_commands.json"
    compiled=()
    for f in "${sources[@]}"; do
      if grep -q "\"file\": \"$here/$f\"" "$db/compile_commands.json"; then compiled+=("$f")
      else echo "style: $f is not compiled in build/ (skipped by clang-tidy)"; fi
    done
    # A source that passed before with the same headers, flags and checks is not checked again
    # (scripts/tidy_cache.py; the passes are kept in $tidy_cache).
    tidy_cache="${PICOMQ_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picomq/clang-tidy}"
    pending=()
    if ((${#compiled[@]})); then
      mapfile -t pending < <(python3 scripts/tidy_cache.py build "$db/compile_commands.json" "$tidy_cache" "${compiled[@]}")
    fi
    echo "style: clang-tidy: ${#pending[@]} of ${#compiled[@]} not passed before with these headers and flags"
    # One clang-tidy per core (~15 s a file, most of it parsing the headers); each failing file
    # is named with its findings, each passing one recorded.
    if ((${#pending[@]})); then
      printf '%s\0' "${pending[@]}" | DB="$db" xargs -0 -P "$(nproc)" -I{} bash -c 'tidy_one "$1"' _ {} || failed=1
    fi
  fi
fi
((failed == 0)) && echo "style: ok"
exit "$failed"
