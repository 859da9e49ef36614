#!/usr/bin/env bash
# Installs what fpscope needs to build, test and run on Debian 12: Debian's packages (apt-get runs
# only when one is missing; needs root or sudo then), and the PyPI packages, a current torch 2.x among
# them, in a virtual environment outside the checkout that every clone shares (scripts/python-env.sh).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libsqlite3-dev sqlite3 zlib1g-dev libopenblas-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri
  xvfb xauth fonts-dejavu-core
  dataset-fashion-mnist python3-numpy python3-torch libtorch-dev python3-dev python3-venv
  libopenmpi-dev openmpi-bin
)

install_debian_packages() {
  echo "fpscope: installing ${missing[*]}"
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then as_root=(sudo); else
      echo "error: missing packages (${missing[*]}) and not root; run this as root" >&2; exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "fpscope: all Debian packages are installed"
else
  install_debian_packages
fi
bash "$(dirname "$0")/python-env.sh"

