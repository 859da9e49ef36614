#!/usr/bin/env bash
# What tracing adds to a training step of the reference trainer, mode by mode: mptrain's own
# images/s (its training loop only: no start-up, data loading or test pass) turned into ms per step
# of 32 images, untraced and under `fpscope run` with each MODE's options, the runs alternating
# mode after mode, repetition after repetition. Prints, per mode, the median, the quartiles and the
# median's difference from the untraced one. Whole processes are overhead.sh's business; this
# isolates the per-step part, with less noise, and can compare an experimental build's fpscope
# (FPSCOPE=path in a MODE) with this one on the same program.
#
# Usage: injector/preload/bench/step_cost.sh [BUILD_DIR] [MODE...]      (BUILD_DIR default: build)
#   MODE   LABEL=OPTIONS, OPTIONS being `fpscope run` options (e.g. 'basic=--stats basic'), or
#          LABEL=OPTIONS@FPSCOPE to time another fpscope binary (with its own injector beside it).
#          Default: 'no tensors=--ops no-kernel-matches-this' 'basic=--stats basic'
#          'full=' 'every 10=--every 10'.
# Environment:
#   REPS       repetitions (default 9)
#   IMAGES     training images (default 6000: 188 steps)
#   PRECISION  mptrain --precision (default fp32)
#   THREADS    the trainer's threads (default 2)
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
fi
build=${1:-build}
shift || true
modes=("$@")
if ((${#modes[@]} == 0)); then
  modes=("no tensors=--ops no-kernel-matches-this" "basic=--stats basic" "full=" "every 10=--every 10")
fi
reps=${REPS:-9}
images=${IMAGES:-6000}
precision=${PRECISION:-fp32}
threads=${THREADS:-2}
data=${FPSCOPE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
mptrain=$build/bin/mptrain
for tool in "$build/bin/fpscope" "$mptrain"; do
  if [[ ! -x $tool ]]; then
    echo "step_cost.sh: $tool not found; build the targets fpscope, mptrain, mpt_kernels and fpscope_inject" >&2
    exit 2
  fi
done
if ! [[ $reps =~ ^[1-9][0-9]*$ && $images =~ ^[1-9][0-9]*$ ]]; then
  echo "step_cost.sh: REPS and IMAGES must be positive numbers" >&2
  exit 2
fi
for m in "${modes[@]}"; do
  if [[ $m != *=* ]]; then
    echo "step_cost.sh: mode '$m' is not LABEL=OPTIONS" >&2
    exit 2
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

train=(--model cnn --train-subset "$images" --test-subset 32 --epochs 1 --threads "$threads"
       --precision "$precision" --data-dir "$data")
# ms per step of one run of the command given, from the images/s mptrain prints.
step_ms() {
  local out
  if ! out=$("$@" 2>&1); then
    echo "step_cost.sh: this failed: $*" >&2
    echo "$out" | tail -5 >&2
    exit 1
  fi
  awk '/images\/s/ { for (i = 1; i <= NF; ++i) if ($i == "images/s") { print 32000 / $(i - 1); exit } }' <<<"$out"
}
for ((r = 0; r < reps; r++)); do
  step_ms "$mptrain" "${train[@]}" >>"$work/0"
  for i in "${!modes[@]}"; do
    spec=${modes[$i]#*=}
    tool=$build/bin/fpscope
    if [[ $spec == *@* ]]; then tool=${spec##*@}; spec=${spec%@*}; fi
    read -r -a options <<<"$spec"
    step_ms "$tool" run -q --force -o "$work/t.sqlite" ${options[@]+"${options[@]}"} -- "$mptrain" "${train[@]}" \
      >>"$work/$((i + 1))"
  done
  printf '.' >&2
done
printf '\n' >&2
# "median q1 q3" of the numbers in file $1.
quartiles() { sort -g "$1" | awk '{v[NR]=$1} END {m = v[int((NR + 1) / 2)]; printf "%.3f %.3f %.3f\n", m, v[int((NR + 3) / 4)], v[int((3 * NR + 3) / 4)]}'; }
read -r base _ _ < <(quartiles "$work/0")
printf '%-26s | %9s | %-15s | %s\n' "mode ($images images, $precision)" "ms/step" "quartiles" "+ms/step over untraced"
labels=("untraced")
for m in "${modes[@]}"; do labels+=("${m%%=*}"); done
for i in "${!labels[@]}"; do
  read -r med q1 q3 < <(quartiles "$work/$i")
  printf '%-26s | %9s | %-15s | %+.3f\n' "${labels[$i]}" "$med" "$q1-$q3" "$(awk -v a="$med" -v b="$base" 'BEGIN{print a - b}')"
done
echo "medians of $reps alternating runs; mptrain's training loop only (its images/s), 32 images a step"
