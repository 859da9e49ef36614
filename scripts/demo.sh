#!/usr/bin/env bash
# The demo: installs what is missing, builds, trains the reference CNN on a FashionMNIST subset in
# fp32 and in AMP-fp16 under `fpscope run`, then prints the AMP run's report and the comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build
bin=build/bin
mkdir -p runs
common=(--model cnn --epochs 1 --train-subset 6000 --test-subset 1000 --batch-size 32 --seed 1)
"$bin/fpscope" run --force -o runs/fp32.sqlite -- "$bin/mptrain" "${common[@]}" --precision fp32
# The AMP run starts its dynamic loss scale at 2^24, too high for fp16: the first steps overflow, are
# skipped and back the scale off, as GradScaler does, and the report names the kernel that made the
# first Inf. The scale then grows back every 50 clean steps and overflows again now and then.
"$bin/fpscope" run --force -o runs/amp-fp16.sqlite -- "$bin/mptrain" "${common[@]}" \
  --precision amp-fp16 --loss-scale dynamic --scale-init 16777216 --scale-interval 50
"$bin/fpscope" report runs/amp-fp16.sqlite
"$bin/fpscope" compare runs/fp32.sqlite runs/amp-fp16.sqlite
cat <<'MSG'

Traces: runs/fp32.sqlite and runs/amp-fp16.sqlite. Try:
  sqlite3 -header -column runs/amp-fp16.sqlite 'select * from v_first_nonfinite'
  sqlite3 -header -column runs/amp-fp16.sqlite "select * from v_loss_scale where event != 'unchanged'"
  build/bin/fpscope-gui runs/fp32.sqlite runs/amp-fp16.sqlite
MSG
