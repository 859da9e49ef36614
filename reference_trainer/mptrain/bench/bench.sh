#!/usr/bin/env bash
# Training throughput of mptrain in each precision mode on the CNN at 28 and 128 pixels (batch 32,
# 2 threads, a few hundred images), printed as a table with the ratio to fp32; then the same CNN
# in PyTorch on the CPU (bench_torch.py) when python3-torch is installed.
#
#   reference_trainer/mptrain/bench/bench.sh [BUILD_DIR]      (default: build)
#
# Environment: IMAGES (training images per run, default 640), THREADS (default 2),
# DATA_DIR (default /usr/share/datasets/fashion-mnist), PYTHON (default /usr/bin/python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-build}"
mptrain="$build/bin/mptrain"
images="${IMAGES:-640}"
threads="${THREADS:-2}"
data_dir="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
python="${PYTHON:-/usr/bin/python3}"

if [[ ! -x "$mptrain" ]]; then
  echo "bench.sh: $mptrain not found; build it first (cmake --build $build --target mptrain)" >&2
  exit 2
fi

metrics="$(mktemp)"
trap 'rm -f "$metrics"' EXIT

# images/s of one training run.
throughput() {
  local precision="$1" size="$2" scale="none"
  [[ "$precision" == "fp16" || "$precision" == "amp-fp16" ]] && scale="dynamic"
  "$mptrain" --model cnn --precision "$precision" --loss-scale "$scale" --image-size "$size" \
    --batch-size 32 --threads "$threads" --train-subset "$images" --test-subset 32 --seed 1 \
    --data-dir "$data_dir" --metrics-json "$metrics" > /dev/null 2>&1
  "$python" -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["images_per_s"])' "$metrics"
}

ratio() { "$python" -c 'import sys; print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$1" "$2"; }

echo "mptrain, cnn, batch 32, $threads threads, $images training images per run"
printf '%-10s %14s %10s %14s %10s\n' mode "28px img/s" "vs fp32" "128px img/s" "vs fp32"
declare -A base
for precision in fp32 fp16 bf16 amp-fp16 amp-bf16; do
  line=""
  for size in 28 128; do
    rate="$(throughput "$precision" "$size")"
    [[ "$precision" == "fp32" ]] && base[$size]="$rate"
    line+="$(printf '%14s %10s' "$rate" "$(ratio "$rate" "${base[$size]}")") "
  done
  printf '%-10s %s\n' "$precision" "$line"
done

echo
if "$python" -c 'import torch' 2> /dev/null; then
  "$python" "$here/bench_torch.py" --images "$images" --threads "$threads" --data-dir "$data_dir"
else
  echo "PyTorch not importable by $python (apt-get install python3-torch); PyTorch columns skipped"
fi
