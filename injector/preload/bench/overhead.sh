#!/usr/bin/env bash
# Overhead of tracing on the reference trainer: wall time of `mptrain --model cnn` untraced, under
# `fpscope run` with full statistics on every kernel, and under `fpscope run --every 10`, at 28
# and 128 pixels. The three runs alternate, repetition after repetition, so that drift in the
# machine's load hits all of them alike; the table shows median seconds and ratios to untraced.
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

# Seconds (with ns resolution) one command takes; its output is discarded, a failure stops us.
seconds() {
  local t0 t1
  t0=$(date +%s%N)
  if ! "$@" >"$work/out.log" 2>&1; then
    echo "overhead.sh: failed: $*" >&2
    tail -5 "$work/out.log" >&2
    exit 1
  fi
  t1=$(date +%s%N)
  echo "scale=3; ($t1 - $t0) / 1000000000" | bc
}

median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

printf '%-7s %-6s %10s %10s %8s %10s %8s\n' pixels steps untraced full ratio every10 ratio
for pixels in 28 128; do
  steps=$([[ $pixels == 28 ]] && echo "${STEPS28:-40}" || echo "${STEPS128:-20}")
  train=(--model cnn --image-size "$pixels" --train-subset $((steps * 32)) --test-subset 32
         --threads "$threads" --data-dir "$data")
  : >"$work/plain"; : >"$work/full"; : >"$work/every"
  for ((r = 0; r < reps; r++)); do
    seconds "$mptrain" "${train[@]}" >>"$work/plain"
    seconds "$fpscope" run -q --force -o "$work/full.sqlite" -- "$mptrain" "${train[@]}" >>"$work/full"
    seconds "$fpscope" run -q --force --every 10 -o "$work/every.sqlite" -- "$mptrain" "${train[@]}" >>"$work/every"
  done
  plain=$(median <"$work/plain")
  full=$(median <"$work/full")
  every=$(median <"$work/every")
  printf '%-7s %-6s %10.3f %10.3f %7.3fx %10.3f %7.3fx\n' "$pixels" "$steps" "$plain" "$full" \
    "$(echo "scale=4; $full / $plain" | bc)" "$every" "$(echo "scale=4; $every / $plain" | bc)"
done
echo "median of $reps alternating runs; wall time includes process start and the test pass"
