#!/usr/bin/env bash
# Runs the GPU checks from a pack that gpu-checks-pack.sh made (this file is the pack's
# run-gpu-checks.sh), on a machine with an NVIDIA GPU and the CUDA 13 runtime:
#
#   fpscope-gpu-checks/run-gpu-checks.sh [RESULTS_DIR]      default: fpscope-gpu-checks/results
#
# Finds CUDA's libraries (cudart, cuBLAS, CUPTI: the toolkit's, or those of Python's nvidia-*
# packages), points the programs and the tests at the pack's files, and runs gpu-checks.sh on the
# pack's build. Environment as for gpu-checks.sh (STEPS, REPS, THREADS, PYTHON).
# Exit status: gpu-checks.sh's; 2 when a library the programs need cannot be found.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
results="${1:-$root/results}"
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi

python="${PYTHON:-python3}"
site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)"
cuda_dirs=""
for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13; do
  found="$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')"
  if [[ -z "$found" ]]; then
    for dir in /usr/local/cuda /usr/local/cuda-13* ${site:+"$site/nvidia"}; do
      [[ -d "$dir" ]] || continue
      found="$(find -L "$dir" -maxdepth 6 -name "$name" 2>/dev/null | head -1)"
      [[ -n "$found" ]] && break
    done
  fi
  [[ -n "$found" ]] && cuda_dirs="$cuda_dirs:$(dirname "$found")"
done
# Of the pack's libraries, only those this machine lacks: its own stay first for everything else
# (its Python's sqlite3 and zlib, say).
lacking="$(mktemp -d)"
trap 'rm -rf "$lacking"' EXIT
for lib in "$root"/deps/*; do
  ldconfig -p 2>/dev/null | grep -q "^\s*${lib##*/} " || ln -s "$lib" "$lacking/"
done
export LD_LIBRARY_PATH="$root/build/lib:$lacking$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The tests read these from the folders of the build they were compiled in, unless told.
export FPSCOPE_TEST_GPU_LIBRARY_DIR="$root/build/lib" MPT_TEST_KERNELS_DOC="$root/docs/kernels.md"

missing="$(for f in "$root"/build/bin/* "$root"/build/lib/*.so; do ldd "$f" | sed -n "s|^\s*\(.*\) => not found|${f##*/}: \1|p"; done)"
if [[ -n "$missing" ]]; then
  echo "run-gpu-checks: these libraries were not found (install the CUDA 13 runtime, cuBLAS and CUPTI):" >&2
  echo "$missing" >&2
  exit 2
fi
NO_BUILD=1 DATA_DIR="$root/data" PYTHON="$python" \
  bash "$root/reference_trainer/kernels/cuda/bench/gpu-checks.sh" "$root/build" "$results"
