#!/usr/bin/env bash
# Overhead of tracing on the reference trainer: wall time of `mptrain --model cnn` untraced, under
# `fpscope run` with full statistics on every kernel, and under `fpscope run --every 10`, at 28
# and 128 pixels. The three runs alternate, repetition after repetition, so that drift in the
# machine's load hits all of them alike; the table shows median seconds and ratios to untraced,
# of wall time and of CPU time (user + system, of the program and of the collector together:
# on a machine shared with other work, CPU time is the steadier of the two).
#
# Usage: injector/preload/bench/overhead.sh [BUILD_DIR]      (default: build)
# Environment: REPS (5), STEPS28 (40), STEPS128 (20) training steps of 32 images, THREADS (2).
set -euo pipefail

build=${1:-build}
reps=${REPS:-5}
threads=${THREADS:-2}
fpscope=$build/bin/fpscope
mptrain=$build/bin/mptrain
data=${FPSCOPE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
for tool in "$fpscope" "$mptrain"; do
  if [[ ! -x $tool ]]; then
    echo "overhead.sh: $tool not found; build the targets fpscope, mptrain, mpt_kernels and fpscope_inject in $build" >&2
    exit 2
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "wall cpu" seconds of one command; its output is discarded, a failure stops us.
measure() {
  local t0 t1
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%U %S' -o "$work/cpu" "$@" >"$work/out.log" 2>&1; then
    echo "overhead.sh: failed: $*" >&2
    tail -5 "$work/out.log" >&2
    exit 1
  fi
  t1=$(date +%s%N)
  awk -v ns=$((t1 - t0)) 'END {printf "%.3f %.3f\n", ns / 1e9, $1 + $2}' "$work/cpu"
}

# Median of column $1 of stdin.
median() { awk -v c="$1" '{print $c}' | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3fx", a / b}'; }

printf '%-6s %-5s | %-15s | %-31s | %-31s\n' "" "" "untraced" "full statistics, every kernel" "--every 10"
printf '%-6s %-5s | %7s %7s | %7s %7s %7s %7s | %7s %7s %7s %7s\n' pixels steps wall cpu wall ratio cpu ratio \
  wall ratio cpu ratio
for pixels in 28 128; do
  steps=$([[ $pixels == 28 ]] && echo "${STEPS28:-40}" || echo "${STEPS128:-20}")
  train=(--model cnn --image-size "$pixels" --train-subset $((steps * 32)) --test-subset 32
         --threads "$threads" --data-dir "$data")
  : >"$work/plain"; : >"$work/full"; : >"$work/every"
  for ((r = 0; r < reps; r++)); do
    measure "$mptrain" "${train[@]}" >>"$work/plain"
    measure "$fpscope" run -q --force -o "$work/full.sqlite" -- "$mptrain" "${train[@]}" >>"$work/full"
    measure "$fpscope" run -q --force --every 10 -o "$work/every.sqlite" -- "$mptrain" "${train[@]}" >>"$work/every"
  done
  pw=$(median 1 <"$work/plain"); pc=$(median 2 <"$work/plain")
  fw=$(median 1 <"$work/full"); fc=$(median 2 <"$work/full")
  ew=$(median 1 <"$work/every"); ec=$(median 2 <"$work/every")
  printf '%-6s %-5s | %7.2f %7.2f | %7.2f %7s %7.2f %7s | %7.2f %7s %7.2f %7s\n' "$pixels" "$steps" "$pw" "$pc" \
    "$fw" "$(ratio "$fw" "$pw")" "$fc" "$(ratio "$fc" "$pc")" "$ew" "$(ratio "$ew" "$pw")" "$ec" "$(ratio "$ec" "$pc")"
done
echo "median of $reps alternating runs of each; times include process start and the test pass"
