#!/usr/bin/env bash
# Times the README's first command on a fresh Debian 12 machine: a minbase root made by
# mmdebstrap (nothing installed beyond Debian's essential packages; empty apt and compiler
# caches), this checkout's HEAD copied in (git archive), then `bash scripts/quickstart.sh` run
# inside it as a new user would, stopping after 3 s. Prints the wall time of the quickstart alone
# (setup + build + run) and the targets it compiled, and asserts the 10 records came out and that
# the build printed no compiler warning. Network: Debian's mirror only.
#   tests/packaging/quickstart_fresh.sh [LIMIT_SECONDS]   (default 300: fails above it)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
limit="${1:-300}"
work="$(mktemp -d -t picomq-fresh.XXXXXX)"
trap 'rm -rf "$work"' EXIT
git -C "$root" archive --format=tar --prefix=picomq-connect/ HEAD >"$work/src.tar"
cat >"$work/run.sh" <<'SH'
set -eu
cd /root && tar xf /tmp/src.tar && cd picomq-connect
start=$(date +%s.%N)
QUICKSTART_SECONDS=3 bash scripts/quickstart.sh >/tmp/quickstart.out 2>/tmp/quickstart.err </dev/null ||
  { echo "the quickstart failed:"; tail -n 40 /tmp/quickstart.err; tail -n 20 /tmp/quickstart.out; exit 1; }
end=$(date +%s.%N)
records=$(grep -c '"pico_topic"' /tmp/quickstart.out || true)
steps=$(grep -oE '^\[[0-9]+/[0-9]+\]' /tmp/quickstart.out | tail -n 1 || true)
warnings=$(cat /tmp/quickstart.out /tmp/quickstart.err | grep -c 'warning:' || true)
echo "quickstart on a fresh Debian 12 root: $(echo "$end - $start" | bc) s, $records records, build steps $steps, $warnings compiler warnings, load $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$records" -eq 10 ] || { tail -n 30 /tmp/quickstart.err; exit 1; }
[ "$warnings" -eq 0 ] || { cat /tmp/quickstart.out /tmp/quickstart.err | grep -A3 'warning:' | head -n 40; exit 1; }
SH
# The certificate authorities this machine adds to Debian's (a network that inspects TLS): a new
# machine of this kind has them too, and crates.io (librdkafka's source) is reached through it.
extra_cas=()
for ca in /usr/local/share/ca-certificates/*.crt; do [[ -f "$ca" ]] && extra_cas+=("$ca"); done
ca_hooks=()
if ((${#extra_cas[@]})); then
  ca_hooks=(--customize-hook="copy-in ${extra_cas[*]} /usr/local/share/ca-certificates"
            --customize-hook='chroot "$1" update-ca-certificates >/dev/null')
fi
mmdebstrap --quiet --variant=minbase --include=ca-certificates,bc \
  "${ca_hooks[@]}" \
  --customize-hook="copy-in $work/src.tar $work/run.sh /tmp" \
  --customize-hook='chroot "$1" sh /tmp/run.sh > /tmp/picomq-fresh-result 2>&1 || { cat /tmp/picomq-fresh-result; exit 1; }' \
  bookworm /dev/null
cat /tmp/picomq-fresh-result
seconds="$(sed -n 's/.*root: \([0-9.]*\) s.*/\1/p' /tmp/picomq-fresh-result)"
awk -v s="$seconds" -v l="$limit" 'BEGIN { if (s > l) { print "over the limit of " l " s"; exit 1 } }'
