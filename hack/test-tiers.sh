#!/usr/bin/env bash
# Runs the named tiers of make test (make test-<tier> each) and prints a
# table of how long each took, also written to bin/test-logs/tiers.txt.
#
# The fault tier is mostly waiting on the manager (timeouts, a catch-up's
# batch, slow deletes) and on little CPU, so it runs in the background beside
# the others, its output kept in bin/test-logs/fault.log and printed when it
# ends. TEST_TIERS_SERIAL=1 runs every tier in turn instead (for a profile).
# Every tier runs even when one fails; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logdir=bin/test-logs
mkdir -p "$logdir"

background=fault
if [ -n "${TEST_TIERS_SERIAL:-}" ]; then background=; fi

rows=() status=0
record() { # tier seconds rc how
  local result=ok
  [ "$3" = 0 ] || result="FAILED (exit $3)"
  rows+=("$(printf '%-14s %7s  %-10s %s' "$1" "$(printf '%d:%02d' $(($2 / 60)) $(($2 % 60)))" "$4" "$result")")
  if [ "$3" != 0 ] && [ "$status" = 0 ]; then status=$3; fi
}

begin=$(date +%s)
# The later tiers' tools build ahead of them (make prebuild), beside the
# first tiers; PREBUILD=0 leaves each tier to build its own.
pre_pid=
if [ "${PREBUILD:-1}" != 0 ] && [ $# -gt 1 ]; then
  echo "== prebuild: the later tiers' tools, in the background (log: $logdir/prebuild.log)"
  $MAKE --no-print-directory prebuild >"$logdir/prebuild.log" 2>&1 &
  pre_pid=$!
fi
bg_pid= bg_start=
for tier in "$@"; do
  if [ "$tier" = "$background" ]; then
    bg_start=$(date +%s)
    echo "== tier $tier: started in the background (log: $logdir/$tier.log)"
    # The tier's own end is written beside its log: the table gives the
    # time it ran, not the time until the tiers in turn were done.
    rm -f "$logdir/$tier.end"
    { $MAKE --no-print-directory "test-$tier" >"$logdir/$tier.log" 2>&1; rc=$?; date +%s >"$logdir/$tier.end"; exit $rc; } &
    bg_pid=$!
  fi
done
for tier in "$@"; do
  [ "$tier" = "$background" ] && continue
  echo "== tier $tier"
  start=$(date +%s)
  $MAKE --no-print-directory "test-$tier"
  rc=$?
  record "$tier" $(($(date +%s) - start)) "$rc" "in turn"
done
if [ -n "$bg_pid" ]; then
  echo "== tier $background: waiting for it to end"
  wait "$bg_pid"
  rc=$?
  cat "$logdir/$background.log"
  bg_end=$(cat "$logdir/$background.end" 2>/dev/null || date +%s)
  record "$background" $((bg_end - bg_start)) "$rc" "beside"
fi

if [ -n "$pre_pid" ]; then
  wait "$pre_pid"
  grep '^prebuild:' "$logdir/prebuild.log"
fi

{
  echo
  echo "tier            time   ran         result"
  printf '%s\n' "${rows[@]}"
  total=$(($(date +%s) - begin))
  printf 'all tiers      %7s\n' "$(printf '%d:%02d' $((total / 60)) $((total % 60)))"
} | tee "$logdir/tiers.txt"
exit "$status"
