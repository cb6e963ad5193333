#!/usr/bin/env bash
# bench/changes.sh's picomq entry: runs picomq-connect (its postgres sink applying Debezium change
# events into a replica table) until the replica equals the source, measured as the peers are
# (bench/peers/peer_lib.sh: the process from launch until the replica is equal, start-up, CPU, peak
# RSS, the destination server's CPU), so both sides of bench/changes.sh are timed by one clock.
#
#   changes_picomq.sh N CONNINFO TABLE EXPECTED WORKDIR -- BIN --config RUNTIME_TOML
#     N         the change events on the topic (the "records" reported)
#     CONNINFO  the replica database (libpq), polled over one psql session
#     TABLE     the replica table (public schema)
#     EXPECTED  the source's checksum (bench/peers/changes_lib.sh: "<rows> <md5>")
#     WORKDIR   the runtime's stderr goes to WORKDIR/stderr.log
#
# Prints ONE line of JSON on stdout (peer_lib.sh's fields) with "equal": whether the replica ended
# equal to the source. Knobs: PEER_SERVER_PID, PEER_POLL_MS, PEER_TIMEOUT_S (peer_lib.sh),
# CHANGES_SETTLE_S (changes_lib.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if (($# < 8)) || [[ "$6" != -- ]]; then
  echo "usage: $0 N CONNINFO TABLE EXPECTED WORKDIR -- BIN --config RUNTIME_TOML" >&2; exit 2
fi
n="$1"; conninfo="$2"; table="$3"; expected="$4"; work="$5"
shift 6
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "changes_picomq: N must be a positive integer" >&2; exit 2; }
[[ "$table" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "changes_picomq: TABLE must be a lower-case unquoted identifier" >&2; exit 2; }
mkdir -p "$work"

# shellcheck source=bench/peers/peer_lib.sh
source "$here/peers/peer_lib.sh"
peer_init picomq-changes
# shellcheck source=bench/peers/changes_lib.sh
source "$here/peers/changes_lib.sh"

changes_connect "$conninfo" "$table" "$expected" "$n"
log "$* -> $table until it equals the source ($expected)"
# A sink that stops in error makes the runtime exit ("no sink can make progress"): peer_wait sees the
# process gone and fails with its log's last lines.
peer_start "$work/stderr.log" "$@"
peer_wait "$n" changes_count
peer_report picomq-connect-postgres-changes ",\"equal\":$changes_equal,\"replica\":\"$changes_replica_sum\""
