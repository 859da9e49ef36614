#!/usr/bin/env bash
# The summaries a run's end waits for: mptrain's CNN traced by `fpscope run` (full statistics, and
# `--every 10`), and for each trace the time the collector took to make its summary tables (meta
# finalize_ms: on two connections) against the same contract/schema/trace_finalize.sql run again
# by the sqlite3 shell on one connection on a copy of the trace (synchronous off, as the collector
# runs it). Medians and min-max over REPS runs, the two measurements of each trace taken one after
# the other.
#
# Usage: collector/bench/finalize.sh [BUILD_DIR]     (default: build)
# Environment:
#   REPS     traces of each case (default 3)
#   CASES    space separated IMAGES-MODE, MODE full or every10 (default "6000-full 6000-every10
#            30000-full 30000-every10"); 28 px fp32, 32 images a step
#   SCRIPT   the summaries' SQL the one-connection column runs (default: this tree's
#            contract/schema/trace_finalize.sql; an earlier version, to compare:
#            SCRIPT=<(git show REV:contract/schema/trace_finalize.sql))
set -euo pipefail

build=${1:-build}
reps=${REPS:-3}
cases=${CASES:-"6000-full 6000-every10 30000-full 30000-every10"}
here=$(cd "$(dirname "$0")" && pwd)
script=${SCRIPT:-$here/../../contract/schema/trace_finalize.sql}
fpscope=$build/bin/fpscope
mptrain=$build/bin/mptrain
data=${FPSCOPE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
for tool in "$fpscope" "$mptrain"; do
  [[ -x $tool ]] || { echo "finalize.sh: $tool not found; build fpscope and mptrain in $build" >&2; exit 2; }
done
[[ -r $script ]] || { echo "finalize.sh: cannot read SCRIPT $script" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "finalize.sh: the sqlite3 shell is needed (apt-get install sqlite3)" >&2; exit 2; }
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "finalize.sh: REPS must be a positive number, not '$reps'" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat "$script" >"$work/script.sql"  # read once: SCRIPT may be a pipe

# "median min max" of the numbers on stdin.
spread() { sort -g | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.1f (%.1f-%.1f)", m, v[1], v[NR]}'; }

printf '%-14s | %9s | %-24s | %-24s\n' case "tensors" "collector ms (min-max)" "one connection ms"
for c in $cases; do
  IFS=- read -r images mode <<<"$c"
  case $mode in
    full) options=() ;;
    every10) options=(--every 10) ;;
    *) echo "finalize.sh: unknown case '$c' (IMAGES-full or IMAGES-every10)" >&2; exit 2 ;;
  esac
  : >"$work/two"; : >"$work/one"
  for ((r = 0; r < reps; r++)); do
    if ! "$fpscope" run -q --force "${options[@]}" -o "$work/t.sqlite" -- "$mptrain" --model cnn --train-subset "$images" \
      --test-subset 32 --epochs 1 --threads 2 --data-dir "$data" >"$work/log" 2>&1; then
      echo "finalize.sh: the traced run failed:" >&2
      tail -5 "$work/log" >&2
      exit 1
    fi
    sqlite3 "$work/t.sqlite" "select value from meta where key = 'finalize_ms'" >>"$work/two"
    cp "$work/t.sqlite" "$work/copy.sqlite"
    t0=$(date +%s%N)
    { echo "PRAGMA synchronous=OFF; BEGIN;"; cat "$work/script.sql"; echo "COMMIT;"; } | sqlite3 "$work/copy.sqlite"
    t1=$(date +%s%N)
    echo "$(( (t1 - t0) / 1000 ))" | awk '{print $1 / 1000}' >>"$work/one"
  done
  tensors=$(sqlite3 "$work/t.sqlite" "select count(*) from tensors")
  printf '%-14s | %9s | %-24s | %-24s\n' "$c" "$tensors" "$(spread <"$work/two")" "$(spread <"$work/one")"
done
echo "ms: median (min-max) of $reps traces; 'one connection' includes the sqlite3 shell's start (a few ms)"
