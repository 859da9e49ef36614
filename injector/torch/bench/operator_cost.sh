#!/usr/bin/env bash
# What tracing adds to each small PyTorch operator: operator_cost.py (torch.add of two 64-float
# tensors, CALLS times, timed inside the program) under `fpscope run` with full statistics, REPS
# times, and with BEFORE set, another build's fpscope in turn with this one's, run for run. For each
# build it prints the median (min-max) of the microseconds an operator took, and of the time the
# program's thread spent in the injector (meta injector.own_time_ms, the warm-up's operators
# included); with BEFORE, the median (min-max) of each repetition's own time this/before, which the
# machine's drift between repetitions reaches far less than the single figures.
#
# Usage: injector/torch/bench/operator_cost.sh [BUILD_DIR]     (default: build)
# Environment:
#   REPS          runs of each build (default 9)
#   CALLS         operators timed in each run (default 5000; many more fill the trace's ring and
#                 time the collector instead)
#   TORCH_PYTHON  the interpreter with torch (default /usr/bin/python3, Debian's torch 1.13)
#   BEFORE        another build folder whose bin/fpscope (lib/ beside it) is timed in turn
set -euo pipefail

build=${1:-build}
reps=${REPS:-9}
calls=${CALLS:-5000}
python=${TORCH_PYTHON:-/usr/bin/python3}
before=${BEFORE:-}
program=$(cd "$(dirname "$0")" && pwd)/operator_cost.py
for tool in "$build/bin/fpscope" ${before:+"$before/bin/fpscope"}; do
  [[ -x $tool ]] || { echo "operator_cost.sh: $tool not found; build fpscope first" >&2; exit 2; }
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "operator_cost.sh: REPS must be a positive number, not '$reps'" >&2; exit 2; }
[[ $calls =~ ^[1-9][0-9]*$ ]] || { echo "operator_cost.sh: CALLS must be a positive number, not '$calls'" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "operator_cost.sh: sqlite3 is needed (apt-get install sqlite3)" >&2; exit 2; }
"$python" -c "import torch" 2>/dev/null || { echo "operator_cost.sh: $python has no torch" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "median (min-max)" of the numbers on stdin.
spread() { sort -g | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.3f (%.3f-%.3f)", m, v[1], v[NR]}'; }

# One traced run: "<us per operator> <own time ms>".
run() {
  local fpscope=$1 trace=$work/trace.sqlite us
  rm -f "$trace"
  us=$("$fpscope" run -q -o "$trace" -- "$python" "$program" --calls "$calls" | awk '{print $1}')
  echo "$us $(sqlite3 "$trace" "SELECT value FROM meta WHERE key = 'injector.own_time_ms'")"
}

: >"$work/this"
: >"$work/before"
for ((i = 0; i < reps; i++)); do
  # Each build goes first every other repetition.
  if [[ -n $before && $((i % 2)) -eq 0 ]]; then
    run "$before/bin/fpscope" >>"$work/before"
    run "$build/bin/fpscope" >>"$work/this"
  else
    run "$build/bin/fpscope" >>"$work/this"
    [[ -n $before ]] && run "$before/bin/fpscope" >>"$work/before"
  fi
done
printf '%-12s %-28s %s\n' "build" "us per operator" "own time ms (the warm-up included), $reps runs of $calls operators"
printf '%-12s %-28s %s\n' "this" "$(cut -d' ' -f1 "$work/this" | spread)" "$(cut -d' ' -f2 "$work/this" | spread)"
if [[ -n $before ]]; then
  printf '%-12s %-28s %s\n' "before" "$(cut -d' ' -f1 "$work/before" | spread)" "$(cut -d' ' -f2 "$work/before" | spread)"
  printf '%-12s %-28s %s\n' "this/before" \
    "$(paste -d' ' "$work/this" "$work/before" | awk '$3 > 0 {print $1 / $3}' | spread)" \
    "$(paste -d' ' "$work/this" "$work/before" | awk '$4 > 0 {print $2 / $4}' | spread)"
fi
exit 0
