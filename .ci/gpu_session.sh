#!/usr/bin/env bash
# Run the device-parametrised suites on a machine with a real NVIDIA GPU and CuPy (the CuPy
# driver, not the emulator), four pytest processes side by side; results go to $OUT (or ./gpu-out).
# Used from a lent GPU machine that has the dependencies but no network and no install:
# the package directories are linked into gputensor/ so the source tree imports as is.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
for d in storage kernels autograd; do [ -e gputensor/$d ] || ln -s ../$d gputensor/$d; done
export GPUTENSOR_CACHE_DIR=$PWD/.gtcache
nvidia-smi -L
timeout 200 python -m gputensor selftest --device cuda > "$OUT/selftest.txt" 2>&1
echo "selftest rc=$? $(tail -1 "$OUT/selftest.txt")"
run() {  # name, paths...
    local name=$1; shift
    timeout 420 python -m pytest -q -k cuda -p no:cacheprovider --tb=short -o addopts="" "$@" \
        --junitxml="$OUT/$name.xml" > "$OUT/$name.txt" 2>&1
    echo "$name rc=$? $(tail -1 "$OUT/$name.txt")"
}
run gputensor tests/gputensor &
run autograd tests/autograd tests/storage tests/kernels &
run nn tests/nn &
run rest tests/optim tests/utils tests/test_training.py tests/test_serialization.py \
    tests/datasets tests/cuda &
wait
