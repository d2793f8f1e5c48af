#!/usr/bin/env bash
# The project's GPU session: one prepared script for a machine with a real NVIDIA GPU and CuPy
# (the CuPy driver, not the emulator). Everything it writes goes under $OUT (or ./gpu-out), in
# at most 7 files (the device tool returns few); each stage has its own time box and the whole
# run ends within GPU_SESSION_LIMIT seconds, stages in order of importance. Used from a lent
# GPU machine that has the dependencies but no network and no install: the package directories
# are linked into gputensor/ so the source tree imports as is.
#   OUT=... .ci/gpu_session.sh            (dry run: GPUTENSOR_CUDA_EMULATOR=1 .ci/gpu_session.sh)
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
LINKS=()  # made here, removed on exit (in a checkout with an editable install they would shadow it)
for d in storage kernels autograd; do
    [ -e gputensor/$d ] || { ln -s ../$d gputensor/$d && LINKS+=("gputensor/$d"); }
done
trap 'rm -f ${LINKS[@]+"${LINKS[@]}"}' EXIT
export GPUTENSOR_CACHE_DIR=${GPUTENSOR_CACHE_DIR:-$PWD/.gtcache} PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
START=$SECONDS
LIMIT=${GPU_SESSION_LIMIT:-560}   # seconds for the whole session
LOG="$OUT/session.txt"            # info, precompile, selftest, the bench table
left() { echo $(( LIMIT - (SECONDS - START) )); }
box() { local want=$1 l; l=$(left); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 5 ] && want=5; echo "$want"; }
stage() { echo "== $1 ($(( SECONDS - START )) s)" | tee -a "$LOG"; }
: > "$LOG"

stage info
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
  $PY -c "import sys, cupy, numpy, numba, torch; print(sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__, 'numba', numba.__version__, 'torch', torch.__version__)"
  $PY -c "import gputensor as gt; from gputensor.kernels.cuda import nvrtc; gt.cuda.init(); print('runtime', gt.cuda.runtime_name(), gt.cuda.get_device_name(), gt.cuda.get_device_capability()); print('nvrtc', nvrtc.version(), nvrtc.toolkit())"
} 2>&1 | tee -a "$LOG"

stage "precompile (NVRTC, every backend source, all cores)"
timeout "$(box 150)" $PY -m gputensor.kernels.cuda.binaries auto >> "$LOG" 2>&1
echo "precompile rc=$? $(tail -1 "$LOG")"

stage "tests/gpu"
timeout "$(box 120)" $PY -m pytest -q -p no:cacheprovider -o addopts="" -rA --tb=short tests/gpu \
    > "$OUT/tests_gpu.txt" 2>&1
echo "tests/gpu rc=$? $(tail -1 "$OUT/tests_gpu.txt")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_gpu.txt" | cut -c1-250

stage "independent checks (shared/gpu/gpu_checks.py)"
if [ -f .gpucheck/gpu_checks.py ]; then
    for c in info ftz readback_race deferred_error_race default_stream_event two_pools \
             devicearray_sync bmm_loop pinned_reuse stale_cache record_stream; do
        echo "-- $c"; timeout "$(box 60)" $PY .gpucheck/gpu_checks.py "$c" 2>&1 | tail -25
    done > "$OUT/gpu_checks.txt" 2>&1
    grep "^CHECK" "$OUT/gpu_checks.txt"
else
    echo "no .gpucheck/gpu_checks.py (copy ../shared/gpu/gpu_checks.py there)"
fi

stage "benchmarks/gpu_bench.py"
timeout "$(box 200)" $PY benchmarks/gpu_bench.py --out "$OUT/gpu_bench.json" > "$OUT/bench.txt" 2>&1
echo "gpu_bench rc=$?"; sed -n '/^item /,$p' "$OUT/bench.txt" | head -45 | tee -a "$LOG"

stage "host profile of eager training steps"
timeout "$(box 60)" $PY benchmarks/gpu_host_profile.py mlp gpt lstm library > "$OUT/host_profile.txt" 2>&1
echo "host profile rc=$?"; grep "unprofiled" "$OUT/host_profile.txt"

stage "selftest"
timeout "$(box 100)" $PY -m gputensor selftest --device cuda >> "$LOG" 2>&1
echo "selftest rc=$? $(tail -1 "$LOG")"

stage "device-parametrised suites on cuda (what time is left; paths new since the last run first)"
NEW_SUITES="tests/nn/test_rnn_fused.py tests/compile tests/cuda/test_cuda_graphs.py
    tests/gputensor/test_fft.py tests/gputensor/test_linalg.py
    tests/gputensor/test_linalg_decompositions.py tests/gputensor/test_linalg_ldl.py
    tests/gputensor/test_special.py tests/gputensor/test_interop.py tests/func tests/distributions"
: > "$OUT/suites.txt"
if [ "$(left)" -gt 30 ]; then
    timeout "$(box 240)" $PY -m pytest -q -k cuda -p no:cacheprovider -o addopts="" --tb=line \
        -n 12 $NEW_SUITES >> "$OUT/suites.txt" 2>&1
    echo "new suites rc=$? $(tail -1 "$OUT/suites.txt")"
fi
if [ "$(left)" -gt 30 ]; then
    timeout "$(box 600)" $PY -m pytest -q -k cuda -p no:cacheprovider -o addopts="" --tb=line \
        -n 12 tests/gputensor tests/autograd tests/nn tests/optim tests/sparse tests/storage \
        tests/utils tests/test_training.py tests/test_serialization.py \
        $(for f in $NEW_SUITES; do printf -- "--deselect %s " "$f"; done) \
        >> "$OUT/suites.txt" 2>&1
    echo "suites rc=$? $(tail -1 "$OUT/suites.txt")"
fi

stage "failures again: on cuda with tracebacks, and their cpu twins (PyTorch-version differences)"
grep "^FAILED" "$OUT/suites.txt" | sed -e 's/^FAILED //' -e 's/ - .*//' > "$OUT/.failed"
if [ -s "$OUT/.failed" ] && [ "$(left)" -gt 20 ]; then
    sed -e 's/\[cuda-/[cpu-/' -e 's/\[cuda\]/[cpu]/' "$OUT/.failed" > "$OUT/.failed_cpu"
    { timeout "$(box 90)" xargs -d '\n' -a "$OUT/.failed" $PY -m pytest -q -p no:cacheprovider \
          -o addopts="" --tb=short -n 12
      echo "== the same tests on cpu"
      timeout "$(box 60)" xargs -d '\n' -a "$OUT/.failed_cpu" $PY -m pytest -q \
          -p no:cacheprovider -o addopts="" --tb=no -rf -n 12
    } > "$OUT/classify.txt" 2>&1
    sed -n '/^== the same tests on cpu/,$p' "$OUT/classify.txt" | grep "^FAILED" \
        | sed -e 's/^FAILED //' -e 's/ - .*//' -e 's/\[cpu-/[cuda-/' -e 's/\[cpu\]/[cuda]/' \
        | sort > "$OUT/.cpu_too"
    echo "failing on cuda only (the rest also fail on this machine's cpu):"
    sort "$OUT/.failed" | comm -23 - "$OUT/.cpu_too" | head -40
fi
rm -f "$OUT/.failed" "$OUT/.failed_cpu" "$OUT/.cpu_too"
stage done
