#!/usr/bin/env bash
# Overhead of tracing on the reference trainer and on the same CNN in PyTorch: whole-process wall
# time of `mptrain --model cnn` (or of injector/torch/examples/fashion_cnn.py) untraced, under `fpscope run` with full statistics on every kernel, and under `fpscope run
# --every 10`. The three runs alternate, repetition after repetition, so that drift in the
# machine's load hits all of them alike. For each case the table shows the median untraced time,
# and for each traced mode the median of the per-repetition ratios traced/untraced with their
# minimum and maximum, of wall time and of CPU time (user + system, of the program and of the
# collector together). The last three columns are read from the traces themselves, free of the
# drift between runs: from the `--every 10` traces, the median duration of the steps it measured
# minus that of the steps it left out, in the same run (step 0 left out), so what measuring a step
# costs; then the median time the program's threads spent in the injector (meta
# injector.own_time_ms) and the median CPU time of the collector (meta collector_cpu_ms), each
# with full statistics and with --every 10.
#
# Usage: injector/preload/bench/overhead.sh [BUILD_DIR]      (default: build)
# Environment:
#   REPS     repetitions of each case (default 5)
#   CASES    which cases, space separated, from: 28-6000-fp32 28-6000-amp 28-30000-fp32
#            28-30000-amp 128-640-fp32 torch-6000-fp32 torch-6000-amp (default: all). A case is
#            PIXELS-IMAGES-PRECISION; images are training images (32 a step), amp is amp-fp16 with
#            dynamic loss scaling. torch-IMAGES-PRECISION is the PyTorch CNN at 28 px (amp: CPU
#            autocast to bf16), run by TORCH_PYTHON.
#   TORCH_PYTHON  the interpreter of the PyTorch cases (default /usr/bin/python3, Debian's torch
#            1.13; `scripts/python-env.sh --python` is the PyPI torch 2.x)
#   THREADS  the trainer's threads (default 2)
#   BEFORE   another build folder whose bin/fpscope (with its own injector, lib/ beside it) is
#            timed in the same alternation, on the same program, against the same untraced runs:
#            its rows follow this build's, marked 'before', then a row 'this/before' of the two
#            builds' traced runs of each repetition divided one by the other. For a before/after
#            table in one sitting.
#   BEFORE_OPTIONS  `fpscope run` options of the 'before' runs only, e.g. BEFORE=build
#            BEFORE_OPTIONS="--torch-operators dispatch-mode" times the PyTorch front end's two ways of
#            watching operators against each other.
set -euo pipefail

build=${1:-build}
reps=${REPS:-5}
threads=${THREADS:-2}
cases=${CASES:-"28-6000-fp32 28-6000-amp 28-30000-fp32 28-30000-amp 128-640-fp32 torch-6000-fp32 torch-6000-amp"}
torch_cnn=$(cd "$(dirname "$0")/../../torch/examples" && pwd)/fashion_cnn.py
fpscope=$build/bin/fpscope
mptrain=$build/bin/mptrain
data=${FPSCOPE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
before=${BEFORE:-}
fpscope_before=${before:+$before/bin/fpscope}
read -r -a before_options <<<"${BEFORE_OPTIONS:-}"
for tool in "$fpscope" "$mptrain" ${fpscope_before:+"$fpscope_before"}; do
  if [[ ! -x $tool ]]; then
    echo "overhead.sh: $tool not found; build the targets fpscope, mptrain, mpt_kernels and fpscope_inject in its build folder" >&2
    exit 2
  fi
done
if ! command -v sqlite3 >/dev/null; then
  echo "overhead.sh: the sqlite3 shell is needed to read the traces (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
if ! [[ $reps =~ ^[1-9][0-9]*$ ]]; then
  echo "overhead.sh: REPS must be a positive number, not '$reps'" >&2
  exit 2
fi
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
  awk -v ns=$((t1 - t0)) 'END {printf "%.4f %.4f\n", ns / 1e9, $1 + $2}' "$work/cpu"
}

# "median min max" of the numbers on stdin, one per line.
spread() { sort -g | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.3f %.3f %.3f\n", m, v[1], v[NR]}'; }
# Milliseconds a measured step takes over a step left out, medians within the trace $1.
watched_step_ms() {
  sqlite3 "$1" "WITH s AS (SELECT r.end_ns - r.start_ns AS ns,
                                  EXISTS (SELECT 1 FROM kernels k WHERE k.step = r.step AND k.sampled = 1) AS w
                           FROM nvtx_ranges r WHERE r.kind = 'step' AND r.step > 0),
                     m AS (SELECT w, ns, row_number() OVER (PARTITION BY w ORDER BY ns) AS i,
                                  count(*) OVER (PARTITION BY w) AS n FROM s),
                     med AS (SELECT w, avg(ns) AS ns FROM m WHERE i IN ((n + 1) / 2, (n + 2) / 2) GROUP BY w)
                SELECT CASE WHEN d IS NULL THEN 'n/a' ELSE printf('%.3f', d / 1e6) END
                FROM (SELECT (SELECT ns FROM med WHERE w = 1) - (SELECT ns FROM med WHERE w = 0) AS d)"
}

# Meta $2 of the trace $1 (milliseconds), n/a where the trace has none (a build before it).
meta_ms() {
  local ms
  ms=$(sqlite3 "$1" "SELECT value FROM meta WHERE key = '$2'")
  echo "${ms:-n/a}"
}

# "12.3 / 4.5": the medians of files $1.full$2 and $1.every$2, n/a for one with an n/a.
medians() {
  local m
  for m in full every; do
    if grep -q n/a "$1.$m$2"; then printf 'n/a '; else spread <"$1.$m$2" | awk '{printf "%.1f ", $1}'; fi
  done | sed 's/ $//; s/ / \/ /'
}

# Per-repetition ratios of column $1 of file $2 over the same column of file $3.
ratios() { paste -d' ' "$2" "$3" | awk -v c="$1" '{print $c / $(c + 2)}'; }
# "1.234x (1.200-1.300)" from "median min max".
show() { awk '{printf "%.3fx (%.3f-%.3f)", $1, $2, $3}'; }

printf '%-24s | %-13s | %-46s | %-46s | %-21s | %-15s | %s\n' "" "untraced" "full statistics, every kernel" "--every 10" \
  "measured step" "own time, ms" "collector cpu, ms"
printf '%-24s | %6s %6s | %-22s %-23s | %-22s %-23s | %-21s | %-15s | %s\n' case wall cpu "wall ratio (min-max)" \
  "cpu ratio (min-max)" "wall ratio (min-max)" "cpu ratio (min-max)" "+ms (min-max)" "full / every 10" "full / every 10"
for c in $cases; do
  IFS=- read -r pixels images precision <<<"$c"
  if ! [[ ($pixels =~ ^[0-9]+$ || $pixels == torch) && $images =~ ^[0-9]+$ && ($precision == fp32 || $precision == amp) ]]; then
    echo "overhead.sh: unknown case '$c' (PIXELS-IMAGES-fp32, PIXELS-IMAGES-amp or torch-IMAGES-...)" >&2
    exit 2
  fi
  if [[ $pixels == torch ]]; then
    # Without the front end in the build, `fpscope run` would time the program untraced.
    for b in "$build" ${before:+"$before"}; do
      if [[ ! -f $b/share/fpscope/python/sitecustomize.py ]]; then
        echo "overhead.sh: $b has no PyTorch front end (share/fpscope/python); build everything in it" >&2
        exit 2
      fi
    done
    program=${TORCH_PYTHON:-/usr/bin/python3}
    train=("$torch_cnn" --images "$images" --threads "$threads" --data-dir "$data")
    if [[ $precision == amp ]]; then train+=(--precision amp-bf16); fi
  else
    program=$mptrain
    train=(--model cnn --image-size "$pixels" --train-subset "$images" --test-subset 32 --epochs 1
           --threads "$threads" --data-dir "$data")
    if [[ $precision == amp ]]; then train+=(--precision amp-fp16 --loss-scale dynamic); fi
  fi
  : >"$work/plain"; : >"$work/full"; : >"$work/every"; : >"$work/full.before"; : >"$work/every.before"
  : >"$work/step"; : >"$work/step.before"
  for f in own coll; do
    : >"$work/$f.full"; : >"$work/$f.every"; : >"$work/$f.full.before"; : >"$work/$f.every.before"
  done
  # The traced runs of one fpscope ($1), into the files with suffix $2, with the options after.
  traced() {
    local tool=$1 suffix=$2
    shift 2
    measure "$tool" run -q --force "$@" -o "$work/full.sqlite" -- "$program" "${train[@]}" >>"$work/full$suffix"
    meta_ms "$work/full.sqlite" injector.own_time_ms >>"$work/own.full$suffix"
    meta_ms "$work/full.sqlite" collector_cpu_ms >>"$work/coll.full$suffix"
    measure "$tool" run -q --force "$@" --every 10 -o "$work/every.sqlite" -- "$program" "${train[@]}" \
      >>"$work/every$suffix"
    watched_step_ms "$work/every.sqlite" >>"$work/step$suffix"
    meta_ms "$work/every.sqlite" injector.own_time_ms >>"$work/own.every$suffix"
    meta_ms "$work/every.sqlite" collector_cpu_ms >>"$work/coll.every$suffix"
  }
  for ((r = 0; r < reps; r++)); do
    measure "$program" "${train[@]}" >>"$work/plain"
    if [[ -n $before && $((r % 2)) == 1 ]]; then  # each build goes first every other repetition
      traced "$fpscope_before" .before ${before_options[@]+"${before_options[@]}"}
      traced "$fpscope" ""
    else
      traced "$fpscope" ""
      if [[ -n $before ]]; then traced "$fpscope_before" .before ${before_options[@]+"${before_options[@]}"}; fi
    fi
  done
  pw=$(awk '{print $1}' "$work/plain" | spread | cut -d' ' -f1)
  pc=$(awk '{print $2}' "$work/plain" | spread | cut -d' ' -f1)
  for suffix in "" ${before:+.before}; do
    printf '%-24s | %6.2f %6.2f | %-22s %-23s | %-22s %-23s | %-21s | %-15s | %s\n' "$c${suffix:+ before}" "$pw" "$pc" \
      "$(ratios 1 "$work/full$suffix" "$work/plain" | spread | show)" \
      "$(ratios 2 "$work/full$suffix" "$work/plain" | spread | show)" \
      "$(ratios 1 "$work/every$suffix" "$work/plain" | spread | show)" \
      "$(ratios 2 "$work/every$suffix" "$work/plain" | spread | show)" \
      "$(if grep -q n/a "$work/step$suffix"; then echo n/a; else spread <"$work/step$suffix" | awk '{printf "%.3f (%.3f-%.3f)", $1, $2, $3}'; fi)" \
      "$(medians "$work/own" "$suffix")" "$(medians "$work/coll" "$suffix")"
  done
  if [[ -n $before ]]; then  # the two builds' traced runs of each repetition, one over the other
    printf '%-24s | %13s | %-46s | %-46s |\n' "$c this/before" "" \
      "$(ratios 1 "$work/full" "$work/full.before" | spread | show) wall" \
      "$(ratios 1 "$work/every" "$work/every.before" | spread | show) wall"
  fi
done
echo "seconds and ratios: median of $reps alternating runs (ratios pair by pair); whole processes, start-up and the test pass included"
