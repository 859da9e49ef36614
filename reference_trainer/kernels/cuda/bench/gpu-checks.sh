#!/usr/bin/env bash
# Every check of docs/gpu.md that needs a GPU, in one command, on a machine with an NVIDIA GPU and
# the CUDA toolkit. Writes a results folder with the raw outputs and summary.md (tables).
#
#   reference_trainer/kernels/cuda/bench/gpu-checks.sh [BUILD_DIR] [RESULTS_DIR]
#        defaults: build-gpu, gpu-checks-<date>
#
#   1. build with CUDA (FPSCOPE_CUDA=ON, Release)
#   2. GPU unit tests: every CUDA kernel against the CPU library, GPU statistics against
#      compute_stats, CUPTI records (none may be skipped on a GPU)
#   3. micro-benchmarks: CUDA kernels, GPU statistics vs CPU statistics
#   4. accuracy per precision mode, GPU against CPU (cnn, same seed and subset)
#   5. step time on the GPU: amp-fp16 and amp-bf16 against fp32 for the MLP 1024-4096-4096-10
#      at batch 256 and the CNN at 128 pixels
#   6. tracing: the MLP step time under `fpscope run` (launches only, basic, full) against
#      without, and its loss-scale events; a traced CNN run on the GPU against the same run on the
#      CPU (check_gpu_trace.py: CUPTI records, device launches measured, the GPU's statistics of the
#      same values equal to the CPU's)
#   7. PyTorch anchor: the same MLP and CNN in PyTorch with autocast and GradScaler (torch_anchor.py)
#   8. the PyTorch front end on CUDA tensors: fashion_cnn.py traced on the GPU against on the CPU
#      (check_gpu_trace.py), and GradScaler's loss-scale events under amp-fp16
#
# Environment: STEPS (training steps of a timing run, default 60), REPS (runs of each tracing mode,
# default 3), THREADS (CPU threads for the CPU runs, default all), DATA_DIR (default
# /usr/share/datasets/fashion-mnist), PYTHON (python3), NO_BUILD=1 (use the binaries already in
# BUILD_DIR). A GPU machine without the development packages runs them from a pack that
# gpu-checks-pack.sh makes on a machine with them.
# Exit status: 0 when every check ran and passed, 1 when a check failed, 2 when it cannot start.
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,30p' "$0" | sed -n '/^#/!q;p' | sed 's/^# \{0,1\}//'; exit 0; fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
build="${1:-$root/build-gpu}"
out="${2:-$root/gpu-checks-$(date -u +%Y%m%dT%H%M%SZ)}"
steps="${STEPS:-60}"
reps="${REPS:-3}"
threads="${THREADS:-$(nproc)}"
data_dir="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
python="${PYTHON:-python3}"
failures=0

if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu-checks: no NVIDIA GPU visible (nvidia-smi -L failed); run this on a GPU machine" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
log() { echo "== $*" | tee -a "$out/log.txt"; }
fail() { echo "FAILED: $*" | tee -a "$out/log.txt"; failures=$((failures + 1)); }

log "environment"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  nvcc --version 2>/dev/null | tail -2
  cat "$root/COMMIT" 2>/dev/null || git -C "$root" rev-parse HEAD; } > "$out/environment.txt" 2>&1

# [1] build
source "$here/gpu_build.sh"
if [[ "${NO_BUILD:-0}" == 1 ]]; then
  log "using the binaries in $build (NO_BUILD=1)"
  for t in "${gpu_programs[@]}"; do
    [[ -x "$build/bin/$t" ]] || { echo "gpu-checks: NO_BUILD=1 but $build/bin/$t is missing" >&2; exit 2; }
  done
else
  log "build in $build"
  if ! gpu_build "$root" "$build" "$out"; then
    echo "gpu-checks: the build failed; see $out/configure.txt and $out/build.txt" >&2
    exit 2
  fi
fi
bin="$build/bin"

# [2] unit tests: a skip on a GPU machine is a failure (the tests skip only without a device)
for t in mpt_cuda_tests fpscope_gpu_tests; do
  log "unit tests: $t"
  "$bin/$t" --gtest_output="json:$out/$t.json" > "$out/$t.txt" 2>&1 || fail "$t (see $out/$t.txt)"
  if grep -q "skipped: no GPU" "$out/$t.txt"; then fail "$t skipped tests although a GPU is present"; fi
done

# [3] micro-benchmarks
log "benchmarks"
"$bin/cuda_kernels_benchmark" --benchmark_out="$out/cuda_kernels_benchmark.json" \
  --benchmark_out_format=json > "$out/cuda_kernels_benchmark.txt" 2>&1 || fail "cuda_kernels_benchmark"
"$bin/gpu_stats_benchmark" --benchmark_out="$out/gpu_stats_benchmark.json" \
  --benchmark_out_format=json > "$out/gpu_stats_benchmark.txt" 2>&1 || fail "gpu_stats_benchmark"

# mptrain with metrics written to $out/runs/<name>.json; stdout/stderr to <name>.txt
mkdir -p "$out/runs"
train() {
  local name="$1"; shift
  "$bin/mptrain" --data-dir "$data_dir" --seed 1 --metrics-json "$out/runs/$name.json" "$@" \
    > "$out/runs/$name.txt" 2>&1 || { fail "mptrain $name (see $out/runs/$name.txt)"; return 1; }
}
scale_for() { [[ "$1" == "fp16" || "$1" == "amp-fp16" ]] && echo dynamic || echo none; }

# [4] accuracy per precision mode, GPU against CPU
log "accuracy per precision mode (cnn, 4096 training images, 1000 test images)"
for mode in fp32 amp-fp16 amp-bf16 fp16 bf16; do
  for device in cpu cuda; do
    train "accuracy-$mode-$device" --model cnn --precision "$mode" --loss-scale "$(scale_for "$mode")" \
      --device "$device" --threads "$threads" --batch-size 64 --train-subset 4096 --test-subset 1000
  done
done

# fp8 modes: the quantize kernels on the GPU against the CPU's (the rest of the step runs as amp-bf16)
for recipe in current mxfp8 nvfp4; do
  for device in cpu cuda; do
    train "accuracy-fp8-$recipe-$device" --model cnn --precision fp8 --fp8-recipe "$recipe" \
      --device "$device" --threads "$threads" --batch-size 64 --train-subset 4096 --test-subset 1000
  done
done

# [5] step time on the GPU
log "step time (mlp 1024-4096-4096-10 batch 256; cnn 128 px batch 64; $steps steps)"
for mode in fp32 amp-fp16 amp-bf16; do
  train "steptime-mlp-$mode" --model mlp --image-size 32 --hidden 4096 --batch-size 256 \
    --train-subset $((256 * steps)) --test-subset 256 --precision "$mode" \
    --loss-scale "$(scale_for "$mode")" --device cuda
  train "steptime-cnn-$mode" --model cnn --image-size 128 --batch-size 64 \
    --train-subset $((64 * steps)) --test-subset 64 --precision "$mode" \
    --loss-scale "$(scale_for "$mode")" --device cuda
done

# [6] tracing overhead (the same MLP run, amp-fp16, under fpscope run): untraced, launches recorded
# but no tensor measured, basic statistics, full statistics; in turn, REPS times
log "tracing overhead by mode ($reps runs of each, in turn)"
mlp=(--data-dir "$data_dir" --seed 1 --model mlp --image-size 32 --hidden 4096 --batch-size 256
     --train-subset $((256 * steps)) --test-subset 256 --precision amp-fp16 --loss-scale dynamic --device cuda)
for ((r = 1; r <= reps; ++r)); do
  for mode in plain launches basic full; do
    name="overhead-$mode-$r"
    case $mode in
      plain) command=("$bin/mptrain") ;;
      launches) command=("$bin/fpscope" run --force -q --ops zzz -o "$out/runs/overhead.sqlite" -- "$bin/mptrain") ;;
      basic) command=("$bin/fpscope" run --force -q --stats basic -o "$out/runs/overhead.sqlite" -- "$bin/mptrain") ;;
      full) command=("$bin/fpscope" run --force -q -o "$out/runs/traced-mlp.sqlite" -- "$bin/mptrain") ;;
    esac
    "${command[@]}" "${mlp[@]}" --metrics-json "$out/runs/$name.json" > "$out/runs/$name.txt" 2>&1 ||
      fail "$name (see $out/runs/$name.txt)"
  done
done
rm -f "$out/runs/overhead.sqlite"
"$python" "$here/check_gpu_trace.py" --loss-scale "$out/runs/traced-mlp.sqlite" > "$out/loss_scale_check.md" 2>&1 ||
  fail "loss-scale events of the traced MLP (see $out/loss_scale_check.md)"
for device in cpu cuda; do
  "$bin/fpscope" run --force -q -o "$out/runs/traced-cnn-$device.sqlite" -- "$bin/mptrain" \
    --data-dir "$data_dir" --seed 1 --model cnn --precision fp32 --batch-size 32 --train-subset 128 \
    --test-subset 64 --threads "$threads" --device "$device" > "$out/runs/traced-cnn-$device.txt" 2>&1 ||
    fail "fpscope run cnn on $device (see $out/runs/traced-cnn-$device.txt)"
done
"$python" "$here/check_gpu_trace.py" "$out/runs/traced-cnn-cuda.sqlite" "$out/runs/traced-cnn-cpu.sqlite" \
  > "$out/trace_check.md" 2>&1 || fail "the GPU trace's checks (see $out/trace_check.md)"
"$bin/fpscope" report "$out/runs/traced-cnn-cuda.sqlite" > "$out/runs/traced-cnn-cuda-report.txt" 2>&1 ||
  fail "fpscope report of the GPU trace (see $out/runs/traced-cnn-cuda-report.txt)"

# [7] PyTorch anchor
log "PyTorch anchor"
if "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  "$python" "$here/torch_anchor.py" --steps "$steps" --json "$out/torch_anchor.json" \
    > "$out/torch_anchor.txt" 2>&1 || fail "torch_anchor.py (see $out/torch_anchor.txt)"
else
  echo "PyTorch with CUDA not importable by $python: anchor not run" | tee -a "$out/log.txt"
fi

# [8] the PyTorch front end on CUDA tensors: the example CNN traced on the GPU against the same
# program traced on the CPU, and its GradScaler's loss-scale events under amp-fp16
log "PyTorch front end on the GPU"
if "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  example="$root/injector/torch/examples/fashion_cnn.py"
  for device in cpu cuda; do
    "$bin/fpscope" run --force -q -o "$out/runs/torch-$device.sqlite" -- "$python" "$example" \
      --data-dir "$data_dir" --images 128 --device "$device" > "$out/runs/torch-$device.txt" 2>&1 ||
      fail "fashion_cnn.py on $device (see $out/runs/torch-$device.txt)"
  done
  "$python" "$here/check_gpu_trace.py" "$out/runs/torch-cuda.sqlite" "$out/runs/torch-cpu.sqlite" \
    > "$out/torch_trace_check.md" 2>&1 || fail "the PyTorch GPU trace's checks (see $out/torch_trace_check.md)"
  "$bin/fpscope" run --force -q -o "$out/runs/torch-amp-fp16.sqlite" -- "$python" "$example" \
    --data-dir "$data_dir" --images 512 --device cuda --precision amp-fp16 > "$out/runs/torch-amp-fp16.txt" 2>&1 ||
    fail "fashion_cnn.py amp-fp16 (see $out/runs/torch-amp-fp16.txt)"
  "$python" "$here/check_gpu_trace.py" --loss-scale "$out/runs/torch-amp-fp16.sqlite" \
    >> "$out/torch_trace_check.md" 2>&1 || fail "GradScaler's loss-scale events (see $out/torch_trace_check.md)"
else
  echo "PyTorch with CUDA not importable by $python: the front end's GPU check not run" | tee -a "$out/log.txt"
fi

"$python" "$here/summarize_gpu_checks.py" "$out" > "$out/summary.md" || fail "summary"
cat "$out/summary.md"
log "results in $out ($failures failure(s))"
[[ $failures -eq 0 ]]
