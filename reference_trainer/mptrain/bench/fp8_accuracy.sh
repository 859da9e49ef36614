#!/usr/bin/env bash
# What fp8 training costs the reference CNN in accuracy: amp-bf16 against every --fp8-recipe
# (the 8-bit ones in the hybrid format: e4m3 forward, e5m2 gradients) over several seeds, one epoch each, printed as a
# table of the final epoch's training loss and the test accuracy (mean over the seeds, with the
# range), and each recipe's difference to amp-bf16 seed by seed (mean and the worst seed).
#
#   reference_trainer/mptrain/bench/fp8_accuracy.sh [BUILD_DIR]      (default: build)
#
# Environment: IMAGES (training images, default 20000), TEST_IMAGES (default 10000), SEEDS
# (default "1 2 3"), RECIPES (default "current delayed mxfp8 mxfp8-ceil block mxfp4 nvfp4"), THREADS
# (default 2), DATA_DIR (default /usr/share/datasets/fashion-mnist), PYTHON (default /usr/bin/python3).
set -euo pipefail

build="${1:-build}"
mptrain="$build/bin/mptrain"
images="${IMAGES:-20000}"
test_images="${TEST_IMAGES:-10000}"
seeds="${SEEDS:-1 2 3}"
recipes="${RECIPES:-current delayed mxfp8 mxfp8-ceil block mxfp4 nvfp4}"
threads="${THREADS:-2}"
data_dir="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
python="${PYTHON:-/usr/bin/python3}"

if [[ ! -x "$mptrain" ]]; then
  echo "fp8_accuracy.sh: $mptrain not found; build it first (cmake --build $build --target mptrain)" >&2
  exit 2
fi

results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT

configs=("amp-bf16:--precision amp-bf16")
for recipe in $recipes; do configs+=("$recipe:--precision fp8 --fp8-recipe $recipe"); done
total=$(( ${#configs[@]} * $(wc -w <<< "$seeds") ))
done_runs=0
for seed in $seeds; do
  for config in "${configs[@]}"; do
    name="${config%%:*}"
    flags="${config#*:}"
    done_runs=$((done_runs + 1))
    printf '\r[%d/%d] %-12s seed %s' "$done_runs" "$total" "$name" "$seed" >&2
    # shellcheck disable=SC2086
    if ! "$mptrain" $flags --seed "$seed" --train-subset "$images" --test-subset "$test_images" --threads "$threads" \
        --data-dir "$data_dir" --metrics-json "$results/$name.$seed.json" > "$results/log" 2>&1; then
      echo >&2; cat "$results/log" >&2
      echo "fp8_accuracy.sh: mptrain $flags --seed $seed failed" >&2
      exit 1
    fi
  done
done
printf '\r%*s\r' 40 '' >&2

"$python" - "$results" "$images" "$test_images" "$seeds" "amp-bf16 $recipes" <<'PY'
import json, statistics, sys
folder, images, test_images, seeds, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
def metric(name, seed, key):
    with open(f"{folder}/{name}.{seed}.json") as f:
        m = json.load(f)
    return m["epochs"][-1]["loss"] if key == "loss" else m["test_accuracy"]
print(f"CNN, {images} training images, {test_images} test images, one epoch, seeds {' '.join(seeds)}")
print(f"{'mode':<14}{'train loss':>12}{'(range)':>18}{'test acc %':>12}{'(range)':>16}{'d loss vs bf16':>16}{'worst':>9}{'d acc':>8}{'worst':>8}")
for name in names:
    loss = [metric(name, s, "loss") for s in seeds]
    acc = [metric(name, s, "acc") for s in seeds]
    dl = [metric(name, s, "loss") - metric("amp-bf16", s, "loss") for s in seeds]
    da = [metric(name, s, "acc") - metric("amp-bf16", s, "acc") for s in seeds]
    row = f"{name:<14}{statistics.mean(loss):>12.4f}{f'{min(loss):.4f}-{max(loss):.4f}':>18}{statistics.mean(acc):>12.2f}{f'{min(acc):.2f}-{max(acc):.2f}':>16}"
    if name != "amp-bf16":
        row += f"{statistics.mean(dl):>+16.4f}{max(dl):>+9.4f}{statistics.mean(da):>+8.2f}{min(da):>+8.2f}"
    print(row)
PY
