#!/usr/bin/env bash
# The cost of a C++ observer of PyTorch's dispatcher (observer_floor.cpp) on the example CNN: the
# plain program and the same program with the observer installed, alternating, whole processes.
# Prints each run's wall seconds, the medians and the median of the pair-by-pair ratios (min-max).
#
# Usage: injector/torch/bench/observer_floor.sh [REPS] [IMAGES]     (defaults 5 and 6000)
# Needs Debian's libtorch-dev (the headers of the libtorch python3-torch uses) and g++.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
reps=${1:-5}
images=${2:-6000}
if [[ ! -f /usr/include/ATen/record_function.h ]]; then
  echo "observer_floor.sh: PyTorch's C++ headers are missing: apt-get install libtorch-dev" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# NDEBUG as libtorch was built: RecordFunction's layout depends on it.
g++ -O2 -DNDEBUG -std=c++17 -shared -fPIC "$here/observer_floor.cpp" -o "$work/libobserver_floor.so" \
  -I/usr/include/torch/csrc/api/include -ltorch_cpu -lc10
cat >"$work/observed.py" <<PY
import ctypes, runpy, sys
import torch
lib = ctypes.CDLL("$work/libobserver_floor.so")
lib.observer_floor_install()
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    lib.observer_floor_report()
PY
program=("$here/../examples/fashion_cnn.py" --images "$images" --threads 2)
seconds() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>>"$work/err.log"; t1=$(date +%s%N); echo "$(( (t1 - t0) / 1000000 ))"; }
: >"$work/pairs"
for ((r = 0; r < reps; r++)); do
  plain=$(seconds /usr/bin/python3 "${program[@]}")
  observed=$(seconds /usr/bin/python3 "$work/observed.py" "${program[@]}")
  echo "$plain $observed" >>"$work/pairs"
done
awk '{printf "plain %.2f s   observed %.2f s\n", $1 / 1000, $2 / 1000}' "$work/pairs"
grep -m1 '^observer:' "$work/err.log" || true
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
awk '{print $1 / 1000}' "$work/pairs" | median | xargs printf 'median plain %.2f s, '
awk '{print $2 / 1000}' "$work/pairs" | median | xargs printf 'observed %.2f s; '
ratio=$(awk '{print $2 / $1}' "$work/pairs" | median)
lo=$(awk '{print $2 / $1}' "$work/pairs" | sort -g | head -1)
hi=$(awk '{print $2 / $1}' "$work/pairs" | sort -g | tail -1)
printf 'observed/plain %.3fx (%.3f-%.3f), %d alternating runs\n' "$ratio" "$lo" "$hi" "$reps"
