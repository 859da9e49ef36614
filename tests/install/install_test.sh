#!/usr/bin/env bash
# The installed tree works on its own: `cmake --install` into a fresh prefix, then, from another
# working folder and with no LD_LIBRARY_PATH, the installed `fpscope run` traces the installed
# mptrain (finding its injector relative to itself) and the installed `fpscope report` reads it.
# Usage: install_test.sh BUILD_DIR FASHION_MNIST_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
data=$2
prefix=$(mktemp -d "${TMPDIR:-/tmp}/fpscope-install-XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/fpscope-install-run-XXXXXX")
trap 'rm -rf "$prefix" "$work"' EXIT

fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install failed"; }
for f in bin/fpscope bin/mptrain lib/libfpscope_inject.so lib/libmpt_kernels.so; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
# Nothing installed may look for libraries in the build folder.
if readelf -d "$prefix"/bin/* "$prefix"/lib/*.so | grep -E 'R(UN)?PATH' | grep -qF "$build"; then
  fail "an installed binary keeps a search path into $build"
fi

cd "$work"
unset LD_LIBRARY_PATH FPSCOPE_INJECT_LIB
"$prefix/bin/fpscope" run -q -o run.sqlite -- "$prefix/bin/mptrain" --data-dir "$data" \
  --train-subset 128 --test-subset 32 --batch-size 32 --precision amp-fp16 --loss-scale dynamic >/dev/null \
  || fail "the installed fpscope run failed"
kernels=$("$prefix/bin/fpscope" query run.sqlite "select count(*) from kernels where sampled = 1" --format csv | tail -n 1)
[ "$kernels" -gt 0 ] || fail "the trace holds no measured kernels: the injector was not found"
"$prefix/bin/fpscope" report run.sqlite --section summary | grep -q "exited normally" \
  || fail "the installed fpscope report does not say the run exited normally"
echo "install test: ok ($kernels measured kernels, prefix $prefix)"
