#!/usr/bin/env bash
# What `fpscope run` adds before and after the program: mptrain's CNN (28 px, fp32) or the same CNN
# in PyTorch (injector/torch/examples/fashion_cnn.py, run by /usr/bin/python3) traced, and for
# each run the milliseconds from fpscope's exec to the program's exec (the trace and the ring made,
# the program spawned) and from the program's end (its process gone: the SIGCHLD it sends fpscope)
# to fpscope's own end (its SIGCHLD to its parent), which covers the last records drained, the
# summaries, the trace closed and fpscope's exit. A third column says how long the kernel took to
# tear the program down (its exit to its SIGCHLD), which fpscope may use to finish the trace.
# Read off kernel tracepoints recorded by `perf record -a` (exec, exit, signal generation): the
# program is not traced through ptrace, so its timing is not disturbed. Medians and min-max over
# REPS runs; BEFORE=<build folder> alternates another build's fpscope on the same program.
#
# Needs perf (Debian: linux-perf) and the right to record tracepoints system-wide: root, or
# kernel.perf_event_paranoid set to -1.
#
# Usage: collector/bench/start_end.sh [BUILD_DIR]     (default: build)
# Environment:
#   REPS     runs of each case and build (default 7)
#   CASES    space separated IMAGES-MODE (mptrain) or torch-IMAGES-MODE (PyTorch), MODE full or
#            every10 (default "6000-full 6000-every10")
#   BEFORE   another build folder whose bin/fpscope is timed in turn with this one's
set -euo pipefail

build=${1:-build}
reps=${REPS:-7}
cases=${CASES:-"6000-full 6000-every10"}
before=${BEFORE:-}
mptrain=$build/bin/mptrain
torch_cnn=$(cd "$(dirname "$0")/../../injector/torch/examples" && pwd)/fashion_cnn.py
data=${FPSCOPE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
for tool in "$build/bin/fpscope" "$mptrain" ${before:+"$before/bin/fpscope"}; do
  [[ -x $tool ]] || { echo "start_end.sh: $tool not found; build fpscope and mptrain" >&2; exit 2; }
done
command -v perf >/dev/null || { echo "start_end.sh: perf is needed (apt-get install linux-perf)" >&2; exit 2; }
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "start_end.sh: REPS must be a positive number, not '$reps'" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "median (min-max)" of the numbers on stdin.
spread() { sort -g | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.1f (%.1f-%.1f)", m, v[1], v[NR]}'; }

events=sched:sched_process_exec,sched:sched_process_exit,signal:signal_generate
if ! perf record -q -a -e "$events" -o "$work/probe.data" -- true >/dev/null 2>&1; then
  echo "start_end.sh: perf cannot record the tracepoints $events system-wide; run as root or set kernel.perf_event_paranoid=-1" >&2
  exit 2
fi

# One traced run: "start end teardown" in milliseconds.
run() {
  local fpscope=$1
  shift
  rm -f "$work/t.sqlite"
  perf record -q -a -e "$events" -o "$work/perf.data" -- \
    "$fpscope" run -q --force "$@" -o "$work/t.sqlite" -- "${train[@]}" >/dev/null 2>&1 ||
    { echo "start_end.sh: the traced run failed: $fpscope run $*" >&2; exit 1; }
  perf script -i "$work/perf.data" -F pid,time,event,trace 2>/dev/null | awk -v exe="${train[0]}" '
    { t = $2; sub(":", "", t) }
    /sched_process_exec:/ && root == "" { root = $1; t0 = t }
    /sched_process_exec:/ && index($0, "filename=" exe " ") { program = $1; exec_at = t }
    /sched_process_exit:/ && $1 == program && /group_dead=true/ { exit_at = t }
    /signal_generate:/ && /sig=17 / && $1 == program && index($0, "pid=" root " ") { gone_at = t }
    /signal_generate:/ && /sig=17 / && $1 == root { end_at = t }
    END {
      if (exec_at == "" || gone_at == "" || end_at == "") { print "missing events" > "/dev/stderr"; exit 1 }
      printf "%.2f %.2f %.2f\n", (exec_at - t0) * 1000, (end_at - gone_at) * 1000, (gone_at - exit_at) * 1000
    }' || { echo "start_end.sh: perf did not see the events of a run" >&2; exit 1; }
}

printf '%-20s | %-8s | %-24s | %-24s | %-24s\n' case build "start ms (min-max)" "end ms (min-max)" "teardown ms (min-max)"
for c in $cases; do
  IFS=- read -r first second third <<<"$c"
  if [[ $first == torch ]]; then
    images=$second mode=$third
    train=(/usr/bin/python3 "$torch_cnn" --images "$images" --threads 2 --data-dir "$data")
  else
    images=$first mode=$second
    train=("$mptrain" --model cnn --image-size 28 --train-subset "$images" --test-subset 32 --epochs 1 --threads 2
           --data-dir "$data")
  fi
  [[ $images =~ ^[0-9]+$ && ($mode == full || $mode == every10) ]] ||
    { echo "start_end.sh: unknown case '$c' (IMAGES-full, IMAGES-every10, torch-IMAGES-full or torch-IMAGES-every10)" >&2; exit 2; }
  options=()
  [[ $mode == every10 ]] && options=(--every 10)
  : >"$work/this"; : >"$work/before"
  for ((r = 0; r < reps; r++)); do
    run "$build/bin/fpscope" ${options[@]+"${options[@]}"} >>"$work/this"
    if [[ -n $before ]]; then run "$before/bin/fpscope" ${options[@]+"${options[@]}"} >>"$work/before"; fi
  done
  for which in this ${before:+before}; do
    printf '%-20s | %-8s | %-24s | %-24s | %-24s\n' "$c" "$which" "$(awk '{print $1}' "$work/$which" | spread)" \
      "$(awk '{print $2}' "$work/$which" | spread)" "$(awk '{print $3}' "$work/$which" | spread)"
  done
done
echo "milliseconds: median of $reps runs; start: fpscope's exec to the program's; end: the program gone to fpscope gone; teardown: the program's exit to its end"
