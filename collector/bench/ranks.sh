#!/usr/bin/env bash
# The collector with several traced processes: `fpscope run -- mpirun -np N mptrain --data-parallel`
# for N ranks, each rank writing into its own ring and one collector draining them all into one
# trace. For each N the table gives the records the trace received, the run's wall time, the
# records per second the collector stored, the times a rank found its ring full and waited
# (producer_waits: back-pressure, nothing lost) and the records dropped (must be 0), and the wall
# time of the same run untraced, for the ratio. Medians over REPS runs.
#
# Usage: collector/bench/ranks.sh [BUILD_DIR]     (default: build)
# Environment:
#   RANKS    rank counts, space separated (default "1 2 4 8")
#   REPS     runs of each (default 3)
#   MODEL    mptrain --model (default mlp), IMAGES training images (default 4096),
#            HIDDEN the MLP's width (default 256)
set -euo pipefail

build=${1:-build}
ranks_list=${RANKS:-"1 2 4 8"}
reps=${REPS:-3}
model=${MODEL:-mlp}
images=${IMAGES:-4096}
hidden=${HIDDEN:-256}
fpscope=$build/bin/fpscope
mptrain=$build/bin/mptrain
data=${FPSCOPE_DATA_DIR:-/usr/share/datasets/fashion-mnist}
for tool in "$fpscope" "$mptrain"; do
  [[ -x $tool ]] || { echo "ranks.sh: $tool not found; build fpscope and mptrain in $build" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "ranks.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
seconds() { local t0 t1; t0=$(date +%s%N); "$@" >"$work/out.log" 2>&1 || { tail -5 "$work/out.log" >&2; exit 1; }; t1=$(date +%s%N); echo "$(( (t1 - t0) / 1000000 ))e-3"; }
meta() { sqlite3 "$1" "select value from meta where key = '$2'"; }

printf '%5s | %9s | %8s | %10s | %9s | %7s | %8s | %6s\n' ranks records "wall s" "records/s" "ring full" dropped "untraced" ratio
for n in $ranks_list; do
  train=(mpirun -np "$n" --oversubscribe "$mptrain" --data-parallel --model "$model" --hidden "$hidden"
         --train-subset "$images" --test-subset 64 --threads 1 --data-dir "$data")
  : >"$work/traced" ; : >"$work/plain"; : >"$work/records"; : >"$work/waits"; : >"$work/dropped"
  for ((r = 0; r < reps; ++r)); do
    rm -f "$work/t.sqlite"
    seconds "${train[@]}" >>"$work/plain"
    seconds "$fpscope" run -q -o "$work/t.sqlite" -- "${train[@]}" >>"$work/traced"
    meta "$work/t.sqlite" records >>"$work/records"
    meta "$work/t.sqlite" producer_waits >>"$work/waits"
    meta "$work/t.sqlite" dropped_records >>"$work/dropped"
  done
  wall=$(median <"$work/traced"); plain=$(median <"$work/plain"); records=$(median <"$work/records")
  printf '%5d | %9d | %8.2f | %10.0f | %9d | %7d | %8.2f | %5.2fx\n' "$n" "$records" "$wall" \
    "$(awk -v r="$records" -v w="$wall" 'BEGIN {print r / w}')" "$(median <"$work/waits")" \
    "$(sort -g "$work/dropped" | tail -1)" "$plain" "$(awk -v a="$wall" -v b="$plain" 'BEGIN {print a / b}')"
done
