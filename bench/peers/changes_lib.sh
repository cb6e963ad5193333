# shellcheck shell=bash
# shellcheck disable=SC2034  # count, changes_equal, changes_replica_sum: read by the sourcing runner
# The replica check of bench/changes.sh (sourced): when a replica of the source table `items`
# equals the source. Both of its runners (bench/changes_picomq.sh and
# bench/peers/kafka_connect_jdbc_changes.sh) source it after peer_lib.sh and stop their clock the
# same way; bench/changes.sh sources it for changes_checksum_sql only.
#
#   changes_checksum_sql TABLE        prints the query of TABLE's checksum: "<rows> <md5>", the md5
#                                     of every row as text (id|name|qty|price|note, NULL as \N) in id
#                                     order. The same query on the source and on every replica.
#   changes_connect CONNINFO TABLE EXPECTED N
#                                     opens one psql session on the replica (a coproc, as
#                                     kafka_connect_jdbc.sh polls: no connection per poll)
#   changes_count                     peer_wait's count_fn, below
#
# changes_count polls cheaply until the last change is there, then compares checksums: the source's
# first row is a sentinel (id 0, qty 0: the first event, Debezium's snapshot of it) and the
# workload's last statement sets its qty to 1. Both sinks apply one partition's changes in offset
# order, a batch per transaction, so once qty = 1 is visible every change before it is applied. Then:
#   - before the sentinel row exists: count=0; while it has qty 0: count=1 (the first records are
#     there: peer_wait's start-up ends);
#   - qty 1: the checksum of TABLE (one full scan, only from then on); equal to EXPECTED: count=N
#     (the clock stops), else count=1 and polled again for CHANGES_SETTLE_S (20) seconds, after which
#     count=N with changes_equal=false: the runner reports "equal":false and bench/changes.sh fails
#     the benchmark after its report (it diffs the rows).

changes_checksum_sql() {  # TABLE
  printf '%s' "SELECT count(*) || ' ' || md5(coalesce(string_agg(concat_ws('|', id, name, qty, price, coalesce(note, '\\N')), E'\\n' ORDER BY id), '')) FROM $1"
}

changes_connect() {  # CONNINFO TABLE EXPECTED N
  changes_table="$2"; changes_expected="$3"; changes_n="$4"
  changes_t_last=""; changes_equal=true; changes_replica_sum=""
  coproc CHANGES_PSQL { exec psql -X -qAt "$1" 2>&1; }
  # shellcheck disable=SC2154  # CHANGES_PSQL_PID is set by coproc
  peer_cleanup_hooks+=("kill $CHANGES_PSQL_PID 2>/dev/null")
  changes_in=${CHANGES_PSQL[1]}; changes_out=${CHANGES_PSQL[0]}
}

# changes_query LINE...: sends psql input lines, reads one answer line into $answer
changes_query() {
  printf '%s\n' "$@" >&"$changes_in"
  IFS= read -r -t 60 answer <&"$changes_out" || die "psql did not answer"
}

changes_count() {
  if [[ -z "$changes_t_last" ]]; then
    changes_query "SELECT to_regclass('public.$changes_table') IS NOT NULL AS pico_exists \\gset" '\if :pico_exists' \
      "SELECT coalesce((SELECT qty FROM public.$changes_table WHERE id = 0), -1);" '\else' 'SELECT -1;' '\endif'
    [[ "$answer" =~ ^-?[0-9]+$ ]] || die "psql: $answer"
    count=0
    ((answer >= 0)) || return 0
    count=1
    ((answer >= 1)) || return 0
    changes_t_last="$(date +%s)"
    log "the last change (the sentinel's qty 1) is applied; comparing the replica with the source"
  fi
  changes_query "$(changes_checksum_sql "public.$changes_table");"
  changes_replica_sum="$answer"
  if [[ "$answer" == "$changes_expected" ]]; then count="$changes_n"; return 0; fi
  [[ "$answer" =~ ^[0-9]+\ [0-9a-f]{32}$ ]] || die "psql: $answer"
  count=1
  if (($(date +%s) - changes_t_last > ${CHANGES_SETTLE_S:-20})); then
    log "the replica still differs from the source ${CHANGES_SETTLE_S:-20} s after the last change: replica $answer, source $changes_expected"
    changes_equal=false
    count="$changes_n"
  fi
}
