#!/usr/bin/env bash
# Packs the GPU checks for a machine with an NVIDIA GPU and the CUDA 13 runtime but without this
# project's development packages (a cluster node, a cloud GPU box):
#
#   reference_trainer/kernels/cuda/bench/gpu-checks-pack.sh [BUILD_DIR] [PACK]
#        defaults: build-gpu, fpscope-gpu-checks.tar.xz
#
# Builds as gpu-checks.sh does (unless NO_BUILD=1), then writes PACK with the built programs and
# libraries, the shared libraries they need beyond glibc, libstdc++ and CUDA's, the PyTorch front
# end, the check scripts, docs/kernels.md (a test reads it), the commit, and the first 16384
# training and 2000 test images of FashionMNIST (DATA_DIR, default /usr/share/datasets/fashion-mnist:
# enough for gpu-checks.sh's runs with STEPS up to 64).
# On the GPU machine (glibc 2.36 or newer, GCC 12's libstdc++ or newer):
#
#   tar xf fpscope-gpu-checks.tar.xz && fpscope-gpu-checks/run-gpu-checks.sh [RESULTS_DIR]
#
# Exit status: 0 when the pack was written, 2 when something it needs is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
build="${1:-$root/build-gpu}"
pack="${2:-$root/fpscope-gpu-checks.tar.xz}"
data_dir="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi

source "$here/gpu_build.sh"
if [[ "${NO_BUILD:-0}" != 1 ]]; then
  mkdir -p "$build"
  echo "gpu-checks-pack: building in $build"
  gpu_build "$root" "$build" "$build" ||
    { echo "gpu-checks-pack: the build failed; see $build/configure.txt and $build/build.txt" >&2; exit 2; }
fi
libraries=(libfpscope_inject.so libfpscope_gpu.so libmpt_kernels.so)
for f in "${gpu_programs[@]/#/bin/}" "${libraries[@]/#/lib/}" share/fpscope/python/sitecustomize.py; do
  [[ -e "$build/$f" ]] || { echo "gpu-checks-pack: $build/$f is missing (build with CUDA first)" >&2; exit 2; }
done
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [[ -e "$data_dir/$f" ]] || { echo "gpu-checks-pack: $data_dir/$f is missing (apt-get install dataset-fashion-mnist, or set DATA_DIR)" >&2; exit 2; }
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
top="$stage/fpscope-gpu-checks"
mkdir -p "$top/build/bin" "$top/build/lib" "$top/build/share/fpscope" "$top/deps" "$top/data" "$top/docs" \
         "$top/injector/torch/examples" "$top/reference_trainer/kernels/cuda/bench"
for p in "${gpu_programs[@]}"; do cp "$build/bin/$p" "$top/build/bin/"; done
for l in "${libraries[@]}"; do cp "$build/lib/$l" "$top/build/lib/"; done
cp -r "$build/share/fpscope/python" "$top/build/share/fpscope/"
cp "$here"/{gpu-checks.sh,gpu_build.sh,check_gpu_trace.py,summarize_gpu_checks.py,torch_anchor.py} \
   "$top/reference_trainer/kernels/cuda/bench/"
cp "$here/gpu-checks-packed.sh" "$top/run-gpu-checks.sh"
cp "$root/injector/torch/examples/fashion_cnn.py" "$top/injector/torch/examples/"
cp "$root/docs/kernels.md" "$top/docs/"
git -C "$root" rev-parse HEAD > "$top/COMMIT" 2>/dev/null || echo unknown > "$top/COMMIT"

# The shared libraries the programs need that a GPU machine need not have: all but glibc's,
# libstdc++/libgcc (the machine's own, which its PyTorch needs too), CUDA's and our own. The
# GPU machine's run-gpu-checks.sh uses only those it lacks.
linked="$(ldd "$top"/build/bin/* "$top"/build/lib/*.so)" ||
  { echo "gpu-checks-pack: ldd failed on the built programs" >&2; exit 2; }
if grep -q "not found" <<< "$linked"; then
  echo "gpu-checks-pack: the built programs miss libraries here:" >&2
  grep "not found" <<< "$linked" | sort -u >&2
  exit 2
fi
system='/(libc|libm|libmvec|libdl|librt|libpthread|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
ours='/libcu[a-zA-Z]*\.so|/libnv[a-zA-Z]*\.so|/libfpscope_|/libmpt_'
for lib in $(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<< "$linked" | sort -u); do
  [[ "$lib" =~ $system || "$lib" =~ $ours ]] || cp -L "$lib" "$top/deps/"
done

# The first images of FashionMNIST, as IDX files of their own (the header's count made to match).
python3 - "$data_dir" "$top/data" <<'PY'
import gzip, struct, sys
source, target = sys.argv[1], sys.argv[2]
for prefix, keep in (("train", 16384), ("t10k", 2000)):
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        raw = gzip.open(f"{source}/{prefix}-{kind}.gz").read()
        dims = list(struct.unpack(">" + "I" * raw[3], raw[4:4 + 4 * raw[3]]))
        per_item = 1
        for d in dims[1:]:
            per_item *= d
        keep_items = min(keep, dims[0])
        header = raw[:4] + struct.pack(">" + "I" * len(dims), keep_items, *dims[1:])
        body = raw[4 + 4 * len(dims):4 + 4 * len(dims) + keep_items * per_item]
        with gzip.open(f"{target}/{prefix}-{kind}.gz", "wb") as f:
            f.write(header + body)
PY

mkdir -p "$(dirname "$pack")"
tar -cJf "$pack" -C "$stage" fpscope-gpu-checks
echo "gpu-checks-pack: wrote $pack ($(du -h "$pack" | cut -f1)); on the GPU machine:"
echo "  tar xf $(basename "$pack") && fpscope-gpu-checks/run-gpu-checks.sh [RESULTS_DIR]"
