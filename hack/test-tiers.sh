#!/usr/bin/env bash
# Runs the named tiers of make test (make test-<tier> each) and prints a
# table of how long each took, also written to bin/test-logs/tiers.txt, with
# how busy the machine's CPUs were meanwhile (every core, whatever ran beside).
#
# Two lanes run at once. The fault and kubelet tiers spend their time
# waiting on servers (the manager's timeouts, a catch-up's batch, slow
# deletes, pods starting on kubelets) and on little CPU, so they run one
# after the other in the background beside the rest, the short race tier
# after them; each tier's output is kept in bin/test-logs/<tier>.log and
# printed when the lane ends. The other tiers run in turn in the foreground.
# TEST_TIERS_SERIAL=1 runs every tier in turn instead (for a profile). Every
# tier runs even when one fails; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logdir=bin/test-logs
mkdir -p "$logdir"

beside=" fault kubelet race "
if [ -n "${TEST_TIERS_SERIAL:-}" ]; then beside=" "; fi

rows=() status=0
# cpu prints the machine's busy and total CPU time so far (jiffies, every
# core): a tier's share of busy time says whether it waited on builds and
# servers or computed, the profile a cold run's cuts start from.
cpu() {
  awk '/^cpu /{busy = $2 + $3 + $4 + $7 + $8; print busy, busy + $5 + $6; exit}' /proc/stat 2>/dev/null || echo "0 0"
}
busy() { # "busy total" at the start, and at the end: the percentage busy
  local b0 t0 b1 t1
  read -r b0 t0 <<<"$1"
  read -r b1 t1 <<<"$2"
  if [ $((t1 - t0)) -gt 0 ]; then echo "$((100 * (b1 - b0) / (t1 - t0)))%"; else echo "?"; fi
}
record() { # tier seconds rc how cpu-busy
  local result=ok
  [ "$3" = 0 ] || result="FAILED (exit $3)"
  rows+=("$(printf '%-14s %7s  %-10s %5s  %s' "$1" "$(printf '%d:%02d' $(($2 / 60)) $(($2 % 60)))" "$4" "$5" "$result")")
  if [ "$3" != 0 ] && [ "$status" = 0 ]; then status=$3; fi
}

begin=$(date +%s)
cpu_begin=$(cpu)
# The later tiers' tools build ahead of them (make prebuild), beside the
# first tiers; PREBUILD=0 leaves each tier to build its own.
pre_pid=
if [ "${PREBUILD:-1}" != 0 ] && [ $# -gt 1 ]; then
  echo "== prebuild: the later tiers' tools, in the background (log: $logdir/prebuild.log)"
  $MAKE --no-print-directory prebuild >"$logdir/prebuild.log" 2>&1 &
  pre_pid=$!
fi

# The background lane: each of its tiers writes its start and end (time and
# CPU) beside its log, so the table gives the time each ran.
lane=()
for tier in "$@"; do
  case "$beside" in *" $tier "*) lane+=("$tier") ;; esac
done
lane_pid=
if [ ${#lane[@]} -gt 0 ]; then
  echo "== tiers ${lane[*]}: started in the background, one after the other (logs: $logdir/<tier>.log)"
  for tier in "${lane[@]}"; do rm -f "$logdir/$tier.start" "$logdir/$tier.end"; done
  (
    first=0
    for tier in "${lane[@]}"; do
      echo "$(date +%s) $(cpu)" >"$logdir/$tier.start"
      $MAKE --no-print-directory "test-$tier" >"$logdir/$tier.log" 2>&1
      rc=$?
      echo "$(date +%s) $(cpu) $rc" >"$logdir/$tier.end"
      if [ "$rc" != 0 ] && [ "$first" = 0 ]; then first=$rc; fi
    done
    exit "$first"
  ) &
  lane_pid=$!
fi

for tier in "$@"; do
  case "$beside" in *" $tier "*) continue ;; esac
  echo "== tier $tier"
  start=$(date +%s)
  start_cpu=$(cpu)
  $MAKE --no-print-directory "test-$tier"
  rc=$?
  record "$tier" $(($(date +%s) - start)) "$rc" "in turn" "$(busy "$start_cpu" "$(cpu)")"
done

if [ -n "$lane_pid" ]; then
  echo "== tiers ${lane[*]}: waiting for them to end"
  wait "$lane_pid"
  for tier in "${lane[@]}"; do
    echo "== tier $tier (beside)"
    cat "$logdir/$tier.log" 2>/dev/null
    if read -r t0 b0 c0 <"$logdir/$tier.start" 2>/dev/null && read -r t1 b1 c1 rc <"$logdir/$tier.end" 2>/dev/null; then
      record "$tier" $((t1 - t0)) "$rc" "beside" "$(busy "$b0 $c0" "$b1 $c1")"
    else
      record "$tier" 0 1 "beside" "?"
    fi
  done
fi

if [ -n "$pre_pid" ]; then
  wait "$pre_pid"
  grep '^prebuild:' "$logdir/prebuild.log"
fi

{
  echo
  echo "tier            time   ran          cpu  result"
  printf '%s\n' "${rows[@]}"
  total=$(($(date +%s) - begin))
  printf 'all tiers      %7s  %-10s %5s\n' "$(printf '%d:%02d' $((total / 60)) $((total % 60)))" "" "$(busy "$cpu_begin" "$(cpu)")"
} | tee "$logdir/tiers.txt"
exit "$status"
