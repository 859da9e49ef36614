#!/usr/bin/env bash
# What `fpscope run --updates on` (parameter updates and narrowing-store counts, the default) costs
# against `--updates off`, as the time of a training step: mptrain's bf16 CNN (28 px, batch 32,
# SGD without master weights: every step's updates counted by its optimizer kernels, every store
# counted by the kernel that makes it) and a small GPT-2 in PyTorch (bf16 autocast, AdamW: each
# watched step copies the parameters and compares them after). Runs alternate on and off, PAIRS
# pairs (default 7); prints each side's median step time, its min and max, and the median of the
# per-pair ratios on/off.
#
#   reference_trainer/mptrain/bench/updates_cost.sh [BUILD_DIR]      (default: build)
#
# Environment: PAIRS, IMAGES (CNN training images, default 3200), GPT2_STEPS (default 12),
# DATA_DIR, PYTHON (a Python with torch and transformers; default: scripts/python-env.sh's).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
build="${1:-build}"
pairs="${PAIRS:-7}"
images="${IMAGES:-3200}"
gpt2_steps="${GPT2_STEPS:-12}"
data_dir="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
python="${PYTHON:-$(bash "$root/scripts/python-env.sh" --python 2>/dev/null || true)}"
fpscope="$build/bin/fpscope"
mptrain="$build/bin/mptrain"
for f in "$fpscope" "$mptrain"; do
  [[ -x "$f" ]] || { echo "updates_cost.sh: $f not found; build first (cmake --build $build)" >&2; exit 2; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Milliseconds a training step took in one traced run of the CNN.
cnn_step_ms() {
  "$fpscope" run -q --force --updates "$1" -o "$work/cnn.sqlite" -- "$mptrain" --model cnn --precision bf16 \
    --momentum 0 --lr 1e-4 --batch-size 32 --threads 2 --train-subset "$images" --test-subset 32 --seed 1 \
    --data-dir "$data_dir" --metrics-json "$work/m.json" > /dev/null 2>&1
  "$python" -c 'import json,sys; print("%.4f" % (32000.0 / json.load(open(sys.argv[1]))["images_per_s"]))' "$work/m.json"
}

gpt2_step_ms() {
  "$fpscope" run -q --force --updates "$1" -o "$work/gpt2.sqlite" -- "$python" "$here/updates_gpt2.py" "$gpt2_steps" \
    2> /dev/null | awk '/^step_ms/ {print $2}'
}

# "median min max" of numbers, one a line.
stats() { sort -g | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "%.3f %.3f %.3f\n", m, v[1], v[NR]}'; }

measure() {  # NAME FUNCTION
  local on off ratios=""
  : > "$work/on"; : > "$work/off"
  for ((i = 0; i < pairs; i++)); do
    on="$($2 on)"; off="$($2 off)"
    echo "$on" >> "$work/on"; echo "$off" >> "$work/off"
    ratios+="$(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.4f\n", a / b}')"$'\n'
  done
  read -r on_m on_lo on_hi < <(stats < "$work/on")
  read -r off_m off_lo off_hi < <(stats < "$work/off")
  read -r r_m r_lo r_hi < <(printf "%s" "$ratios" | stats)
  printf "%-26s %10s %18s %10s %18s %8s %16s\n" "$1" "$on_m" "($on_lo..$on_hi)" "$off_m" "($off_lo..$off_hi)" "$r_m" "($r_lo..$r_hi)"
}

echo "ms per training step, median of $pairs alternating pairs (min..max); ratio: median of the pairs' on/off"
printf "%-26s %10s %18s %10s %18s %8s %16s\n" "program" "on" "" "off" "" "on/off" ""
measure "mptrain cnn bf16 (sgd)" cnn_step_ms
if [[ -n "$python" ]] && "$python" -c "import transformers" 2> /dev/null; then
  measure "gpt-2 bf16 autocast" gpt2_step_ms
  "$python" "$here/updates_gpt2.py" 1 | awk '/^parameters/ {printf "gpt-2: %d parameters, %d bytes: a watched step holds a copy (%d bytes) and a nonzero-gradient mask (%d bytes)\n", $2, $4, $4, $2}'
else
  echo "gpt-2: skipped (no Python with torch and transformers: scripts/python-env.sh installs one)"
fi
