#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test, then runs the suite
# again built with AddressSanitizer and UndefinedBehaviorSanitizer (tests that preload the injector
# into another process are left out there: a sanitizer runtime cannot be preloaded second).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

echo "== build (RelWithDebInfo) =="
bash scripts/build.sh build
echo "== tests =="
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 1200)

echo "== build (address,undefined sanitizers) =="
BUILD_TYPE=Debug bash scripts/build.sh build-sanitize -DFPSCOPE_SANITIZE=address,undefined \
  -DFPSCOPE_BUILD_GUI=OFF -DFPSCOPE_BUILD_BENCHMARKS=OFF -DFPSCOPE_CUDA=OFF -DFPSCOPE_TORCH_OBSERVER=OFF
echo "== tests under sanitizers =="
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$(nproc)" --timeout 1200 -LE 'injection|gui|slow')
