#!/usr/bin/env bash
# The virtual environment with fpscope's PyPI packages (scripts/python-requirements.txt): a current
# torch 2.x beside Debian's 1.13, and the tests' references. It lives outside the checkout, named
# after the pinned versions, so that every clone on this machine shares one download:
#   ${FPSCOPE_PYTHON_ENV:-${XDG_CACHE_HOME:-~/.cache}/fpscope/python-<hash of the pins>}
#
#   scripts/python-env.sh            installs it when it is missing or incomplete (once per machine)
#   scripts/python-env.sh --python   prints its interpreter; exit status 1 when it is not installed
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
requirements=$here/python-requirements.txt
base_python=/usr/bin/python3   # Debian's, so that the environment is the same Python as python3-torch's

pins_hash=$(grep -v '^#' "$requirements" | sha256sum | cut -c1-12)
env_dir=${FPSCOPE_PYTHON_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/fpscope/python-$pins_hash}
complete=$env_dir/.fpscope-complete

case "${1:-}" in
  --python)
    if [ -f "$complete" ]; then echo "$env_dir/bin/python"; exit 0; fi
    exit 1 ;;
  -h|--help)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

if [ -f "$complete" ]; then
  echo "fpscope: PyPI packages are installed ($env_dir)"
  exit 0
fi

mkdir -p "$(dirname "$env_dir")"
# Two clones setting up at once: the second waits for the first and then finds it installed.
exec 9>"$env_dir.lock"
flock 9
if [ -f "$complete" ]; then
  echo "fpscope: PyPI packages are installed ($env_dir)"
  exit 0
fi

# The wheels take about 3 GB to download and 5.6 GB installed; pip unpacks in TMPDIR.
need_kb=$((7 * 1024 * 1024))
free_kb=$(df -Pk "$(dirname "$env_dir")" | awk 'NR==2 {print $4}')
if [ "$free_kb" -lt "$need_kb" ]; then
  echo "error: $(dirname "$env_dir") has $((free_kb / 1024 / 1024)) GiB free; the PyPI packages need about 7 GiB." >&2
  echo "       Free some space, or set FPSCOPE_PYTHON_ENV to a folder on a larger disk." >&2
  exit 1
fi

echo "fpscope: installing the PyPI packages (torch $(grep '^torch==' "$requirements" | cut -d= -f3) and"\
     "the tests' references) into $env_dir; the first time downloads about 3 GB"
rm -rf "$env_dir"   # an earlier install that was interrupted
"$base_python" -m venv "$env_dir"
start=$(date +%s)
"$env_dir/bin/python" -m pip install --no-cache-dir --disable-pip-version-check --progress-bar on \
  --require-virtualenv -r "$requirements"
"$env_dir/bin/python" -c "import torch, numpy, ml_dtypes, torchao, transformers" \
  || { echo "error: the PyPI packages installed but do not import (see above)" >&2; exit 1; }
touch "$complete"
echo "fpscope: PyPI packages installed in $(( $(date +%s) - start )) s ($env_dir)"
