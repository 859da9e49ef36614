#!/usr/bin/env bash
# Training throughput of mptrain in each precision mode on the CNN at 28 and 128 pixels (batch 32,
# 2 threads, a few hundred images), printed as a table with the ratio to fp32; then the same CNN
# in PyTorch on the CPU (bench_torch.py) when python3-torch is installed.
#
#   reference_trainer/mptrain/bench/bench.sh [BUILD_DIR]      (default: build)
#
# Each figure is the best of REPEATS runs (default 3): on a shared machine the slowest runs
# measure the neighbours, not the trainer.
# Environment: IMAGES (training images per run, default 320), THREADS (default 2), REPEATS,
# DATA_DIR (default /usr/share/datasets/fashion-mnist), PYTHON (default /usr/bin/python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-build}"
mptrain="$build/bin/mptrain"
images="${IMAGES:-320}"
repeats="${REPEATS:-3}"
threads="${THREADS:-2}"
data_dir="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
python="${PYTHON:-/usr/bin/python3}"

if [[ ! -x "$mptrain" ]]; then
  echo "bench.sh: $mptrain not found; build it first (cmake --build $build --target mptrain)" >&2
  exit 2
fi

metrics="$(mktemp)"
trap 'rm -f "$metrics"' EXIT

# "images/s images-per-cpu-second" of one training run.
one_run() {
  local precision="$1" size="$2" scale="none"
  [[ "$precision" == "fp16" || "$precision" == "amp-fp16" ]] && scale="dynamic"
  "$mptrain" --model cnn --precision "$precision" --loss-scale "$scale" --image-size "$size" \
    --batch-size 32 --threads "$threads" --train-subset "$images" --test-subset 32 --seed 1 \
    --data-dir "$data_dir" --metrics-json "$metrics" > /dev/null 2>&1
  "$python" -c 'import json,sys; m = json.load(open(sys.argv[1])); print("%.1f %.1f" % (m["images_per_s"], int(sys.argv[2]) / m["train_cpu_seconds"]))' "$metrics" "$images"
}

# Best of $repeats runs, wall and CPU figures taken separately.
throughput() {
  local best_wall=0 best_cpu=0 wall cpu
  for ((r = 0; r < repeats; ++r)); do
    read -r wall cpu <<< "$(one_run "$@")"
    best_wall="$("$python" -c 'import sys; print(max(float(a) for a in sys.argv[1:]))' "$best_wall" "$wall")"
    best_cpu="$("$python" -c 'import sys; print(max(float(a) for a in sys.argv[1:]))' "$best_cpu" "$cpu")"
  done
  echo "$best_wall $best_cpu"
}

ratio() { "$python" -c 'import sys; print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$1" "$2"; }

echo "mptrain, cnn, batch 32, $threads threads, $images training images per run, best of $repeats"
echo "(img/cpu-s: images per CPU-second of all threads, steadier than img/s on a busy machine)"
printf '%-10s %11s %7s %10s %7s %12s %7s %10s %7s\n' mode "28px img/s" "vs fp32" "img/cpu-s" "vs fp32" \
  "128px img/s" "vs fp32" "img/cpu-s" "vs fp32"
declare -A base
for precision in fp32 fp16 bf16 amp-fp16 amp-bf16; do
  line=""
  for size in 28 128; do
    read -r wall cpu <<< "$(throughput "$precision" "$size")"
    if [[ "$precision" == "fp32" ]]; then
      base[$size.wall]="$wall"
      base[$size.cpu]="$cpu"
    fi
    width=11
    [[ "$size" == 128 ]] && width=12
    line+="$(printf "%${width}s %7s %10s %7s" "$wall" "$(ratio "$wall" "${base[$size.wall]}")" "$cpu" "$(ratio "$cpu" "${base[$size.cpu]}")") "
  done
  printf '%-10s %s\n' "$precision" "$line"
done

echo
if "$python" -c 'import torch' 2> /dev/null; then
  "$python" "$here/bench_torch.py" --images "$images" --threads "$threads" --data-dir "$data_dir" --repeats "$repeats"
else
  echo "PyTorch not importable by $python (apt-get install python3-torch); PyTorch columns skipped"
fi
