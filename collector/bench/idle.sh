#!/usr/bin/env bash
# The collector's CPU time while the traced program launches nothing: `fpscope run -- sleep SECONDS`
# REPS times, the trace's meta collector_cpu_ms (the fpscope run process's own CPU, draining and
# storing) as median (min-max). BEFORE=<build folder> times another build's fpscope in turn with
# this one's, run for run, so both are measured in one sitting. TRICKLE_MS=<ms> traces instead a
# program that publishes one record every that many milliseconds for the same SECONDS (the test
# program's `trickle` mode, built with the tests): what a program that is seldom busy costs.
#
# Usage: collector/bench/idle.sh [BUILD_DIR]     (default: build)
# Environment:
#   REPS      runs of each build (default 7)
#   SECONDS_  how long the program sleeps (default 5)
#   BEFORE    another build folder whose bin/fpscope is timed in turn with this one's
#   TRICKLE_MS  trace `collector_test_program trickle` (one record every TRICKLE_MS ms) instead of sleep
set -euo pipefail

build=${1:-build}
reps=${REPS:-7}
seconds=${SECONDS_:-5}
before=${BEFORE:-}
trickle=${TRICKLE_MS:-}
program=(sleep "$seconds")
if [[ -n $trickle ]]; then
  [[ $trickle =~ ^[1-9][0-9]*$ ]] || { echo "idle.sh: TRICKLE_MS must be a positive number, not '$trickle'" >&2; exit 2; }
  [[ $seconds =~ ^[1-9][0-9]*$ ]] ||
    { echo "idle.sh: with TRICKLE_MS, SECONDS_ must be a whole number of seconds, not '$seconds'" >&2; exit 2; }
  ((trickle <= seconds * 1000)) ||
    { echo "idle.sh: TRICKLE_MS ($trickle) is longer than the run (SECONDS_=$seconds)" >&2; exit 2; }
  [[ -x $build/bin/collector_test_program ]] ||
    { echo "idle.sh: $build/bin/collector_test_program not found; build the tests first" >&2; exit 2; }
  program=("$build/bin/collector_test_program" trickle $((seconds * 1000 / trickle)) "$trickle")
fi
for tool in "$build/bin/fpscope" ${before:+"$before/bin/fpscope"}; do
  [[ -x $tool ]] || { echo "idle.sh: $tool not found; build fpscope first" >&2; exit 2; }
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "idle.sh: REPS must be a positive number, not '$reps'" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "idle.sh: sqlite3 is needed (apt-get install sqlite3)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "median (min-max)" of the numbers on stdin.
spread() { sort -g | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.1f (%.1f-%.1f)", m, v[1], v[NR]}'; }

# One traced run of the program: the collector's CPU milliseconds.
run() {
  local fpscope=$1 trace=$work/trace.sqlite
  rm -f "$trace"
  "$fpscope" run -q -o "$trace" -- "${program[@]}" >/dev/null
  sqlite3 "$trace" "SELECT value FROM meta WHERE key = 'collector_cpu_ms'"
}

: >"$work/this"
: >"$work/before"
for ((i = 0; i < reps; i++)); do
  [[ -n $before ]] && run "$before/bin/fpscope" >>"$work/before"
  run "$build/bin/fpscope" >>"$work/this"
done
printf '%-10s %s\n' "build" "collector CPU ms over ${program[*]##*/}, median (min-max) of $reps"
printf '%-10s %s\n' "this" "$(spread <"$work/this")"
[[ -n $before ]] && printf '%-10s %s\n' "before" "$(spread <"$work/before")"
exit 0
