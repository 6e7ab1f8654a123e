#!/usr/bin/env bash
# Runs on a lent GPU machine, in a copy of the working tree with .gpukit carried
# (tests/device/pack.sh made it): the GPU tests (make test-gpu's set) and the GPU benchmark
# (make bench-gpu's script), and the measured preflight's GPU figures against the benchmark's
# (tests/device/bench_agree.sh: within 20%), in one call. Logs go to $OUT (the device tool brings them back)
# and the end of each to stdout. BENCH=0 skips the benchmark; TESTS=0 the tests.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
K=$PWD/.gpukit
[ -x "$K/build/ddptop-train" ] || { echo "run: $K missing: run tests/device/pack.sh here first and carry .gpukit"; exit 2; }
# CUDA's libraries from the machine: the toolkit's first, then the pip wheels of its Python
# (nvidia/*/lib: cuBLAS, the runtime, NCCL), which is where its image may keep NCCL
pip_libs=$(python3 -c 'import glob, nvidia, os
print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null)
export LD_LIBRARY_PATH=$K/lib:/usr/local/cuda/lib64${pip_libs:+:$pip_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
missing=$(ldd "$K/build/ddptop-train" "$K/build/bench/bench_gpu" | grep 'not found' | sort -u)
if [ -n "$missing" ]; then
    echo "run: libraries not found on this machine (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
    echo "$missing"
    exit 2
fi
export BUILD=.gpukit/build DDPTOP_BUILD=$K/build
{
    date -u '+date: %Y-%m-%d %H:%M UTC'
    nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm --format=csv,noheader || echo "no nvidia-smi"
    ldd "$K/build/ddptop-train" | grep -E 'cublas|nccl|cudart|openblas'
} 2>&1 | tee "$OUT/machine.txt"
rc=0
if [ "${TESTS:-1}" != 0 ]; then
    DDPTOP_TEST_TIMEOUT=600 bash tests/run.sh '*gpu_*' >"$OUT/test-gpu.log" 2>&1 || rc=1
    tar czf "$OUT/test-logs.tgz" -C .gpukit/build test-logs 2>/dev/null   # one file, not many
    tail -25 "$OUT/test-gpu.log"
fi
if [ "${BENCH:-1}" != 0 ]; then
    bash tests/bench/gpu.sh >"$OUT/bench-gpu.log" 2>&1 || rc=1
    cat "$OUT/bench-gpu.log"
    bash tests/device/bench_agree.sh >"$OUT/bench-agree.log" 2>&1 || rc=1
    cat "$OUT/bench-agree.log"
fi
exit $rc
