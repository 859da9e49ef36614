#!/usr/bin/env bash
# What `fpscope run` adds before and after the program: mptrain's CNN (28 px, fp32) traced, and for
# each run the milliseconds from fpscope's start to the program's exec (the trace and the ring
# made, the program spawned) and from the program's exit (its process gone) to fpscope's exit (the
# last records drained, the summaries, the trace closed). Read off strace's timestamps of those
# three events only (seccomp filtering: the rest of the run is not slowed). Medians and min-max
# over REPS runs; BEFORE=<build folder> alternates another build's fpscope on the same program.
#
# Usage: collector/bench/start_end.sh [BUILD_DIR]     (default: build)
# Environment:
#   REPS     runs of each case and build (default 7)
#   CASES    space separated IMAGES-MODE, MODE full or every10 (default "6000-full 6000-every10")
#   BEFORE   another build folder whose bin/fpscope is timed in turn with this one's
set -euo pipefail

build=${1:-build}
reps=${REPS:-7}
cases=${CASES:-"6000-full 6000-every10"}
before=${BEFORE:-}
mptrain=$build/bin/mptrain
data=${FPSCOPE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
for tool in "$build/bin/fpscope" "$mptrain" ${before:+"$before/bin/fpscope"}; do
  [[ -x $tool ]] || { echo "start_end.sh: $tool not found; build fpscope and mptrain" >&2; exit 2; }
done
command -v strace >/dev/null || { echo "start_end.sh: strace is needed (apt-get install strace)" >&2; exit 2; }
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "start_end.sh: REPS must be a positive number, not '$reps'" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "median (min-max)" of the numbers on stdin.
spread() { sort -g | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.1f (%.1f-%.1f)", m, v[1], v[NR]}'; }

# One traced run: "start end" in milliseconds.
run() {
  local fpscope=$1
  shift
  rm -f "$work/t.sqlite"
  strace --seccomp-bpf -f -ttt -e trace=execve,exit_group -o "$work/strace" \
    "$fpscope" run -q --force "$@" -o "$work/t.sqlite" -- "$mptrain" "${train[@]}" >/dev/null 2>&1 ||
    { echo "start_end.sh: the traced run failed: $fpscope run $*" >&2; exit 1; }
  awk -v exe="$mptrain" 'NR == 1 {t0 = $2; root = $1}
       $3 ~ "^execve\\(\"" && index($0, exe) {program = $1; exec_at = $2}
       $1 == program && /exited with/ {exit_at = $2}
       $1 == root && /exited with/ {end_at = $2}
       END {printf "%.2f %.2f\n", (exec_at - t0) * 1000, (end_at - exit_at) * 1000}' "$work/strace"
}

printf '%-16s | %-8s | %-24s | %-24s\n' case build "start ms (min-max)" "end ms (min-max)"
for c in $cases; do
  IFS=- read -r images mode <<<"$c"
  [[ $images =~ ^[0-9]+$ && ($mode == full || $mode == every10) ]] ||
    { echo "start_end.sh: unknown case '$c' (IMAGES-full or IMAGES-every10)" >&2; exit 2; }
  train=(--model cnn --image-size 28 --train-subset "$images" --test-subset 32 --epochs 1 --threads 2 --data-dir "$data")
  options=()
  [[ $mode == every10 ]] && options=(--every 10)
  : >"$work/this"; : >"$work/before"
  for ((r = 0; r < reps; r++)); do
    run "$build/bin/fpscope" ${options[@]+"${options[@]}"} >>"$work/this"
    if [[ -n $before ]]; then run "$before/bin/fpscope" ${options[@]+"${options[@]}"} >>"$work/before"; fi
  done
  for which in this ${before:+before}; do
    printf '%-16s | %-8s | %-24s | %-24s\n' "$c" "$which" "$(awk '{print $1}' "$work/$which" | spread)" \
      "$(awk '{print $2}' "$work/$which" | spread)"
  done
done
echo "milliseconds: median of $reps runs; start: fpscope's start to the program's exec; end: the program's exit to fpscope's"
