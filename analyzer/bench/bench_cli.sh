#!/usr/bin/env bash
# Times `fpscope report` and `fpscope compare` on two synthetic traces of about N tensor records
# each (default 10 million), several runs each, and prints a table (min, median, max seconds).
# Usage: analyzer/bench/bench_cli.sh [BUILD_DIR] [TENSORS] [RUNS] [TRACE_DIR]
set -euo pipefail
build=${1:-build}
tensors=${2:-10000000}
runs=${3:-5}
dir=${4:-/tmp/fpscope-bench}
bin=$build/bin
mkdir -p "$dir"
a=$dir/fp32-$tensors.sqlite
b=$dir/amp-fp16-$tensors.sqlite
[ -f "$a" ] || "$bin/fpscope-gen-trace" -o "$a" --tensors "$tensors" --precision fp32
[ -f "$b" ] || "$bin/fpscope-gen-trace" -o "$b" --tensors "$tensors" --precision amp-fp16 --loss-scale dynamic \
  --growth-interval 2000 --overflow-at 5000

# Seconds of one run of "$@" (output discarded; a failing command fails the benchmark).
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

row() {
  local label=$1; shift
  local times=()
  for _ in $(seq "$runs"); do times+=("$(seconds "$@")"); done
  printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" -v n="$runs" '
    { t[NR] = $1 }
    END { printf "| %-44s | %4d | %7.3f | %7.3f | %7.3f |\n", label, n, t[1], t[int((n + 1) / 2)], t[n] }'
}

echo "traces: $(du -hL "$a" | cut -f1) and $(du -hL "$b" | cut -f1), $(sqlite3 "$a" 'select count(*) from tensors') and $(sqlite3 "$b" 'select count(*) from tensors') tensor records"
echo "| command                                      | runs |   min s |   med s |   max s |"
echo "|----------------------------------------------|------|---------|---------|---------|"
row "fpscope report fp32 (all sections)" "$bin/fpscope" report "$a"
row "fpscope report amp-fp16 (all sections)" "$bin/fpscope" report "$b"
row "fpscope report amp-fp16 --format json" "$bin/fpscope" report "$b" --format json
row "fpscope compare fp32 amp-fp16" "$bin/fpscope" compare "$a" "$b"
