#!/usr/bin/env bash
# The GPU backend without a GPU: tests/gpu_train.sh run against the fakecuda build of
# ddptop-train (tests/fakecuda: the backend's own kernels, cuBLAS calls and NCCL handling
# running on the CPU behind a test double), with two fake GPUs so that the NCCL pair tests run
# too; then the kernel tests once more with every block's threads, and the blocks, in reverse
# order, which turns a missing __syncthreads that the forward order hides into a wrong result;
# and the GPU benchmark script end to end at small sizes.
# What this can and cannot show: docs/gpu.md, "Without a GPU". Runs on every machine.
set -u
cd "$(dirname "$0")/.."
B=${DDPTOP_BUILD:-$PWD/build}
export DDPTOP_TRAIN_BIN=$B/fakecuda/ddptop-train FAKECUDA_DEVICES=2 CUDA_VISIBLE_DEVICES=0,1
bash tests/gpu_train.sh | sed -u 's/^\(\(not \)\{0,1\}ok [0-9]* - \)/\1fakecuda: /; /^1\.\./d'
rc=${PIPESTATUS[0]}
out=$(FAKECUDA_REVERSE=1 CUDA_VISIBLE_DEVICES=0 "$B/tests/test_gpu_ops_fake" 2>&1); r2=$?
if [ "$r2" = 0 ] && ! grep -q '^not ok' <<<"$out"; then
    echo "ok 100 - fakecuda: every kernel test passes with threads and blocks in reverse order"
else
    echo "not ok 100 - fakecuda: every kernel test passes with threads and blocks in reverse order"
    grep -E '^(not ok|#)|fakecuda:' <<<"$out" | head -20 | sed 's/^/# /'
fi

# The GPU benchmark end to end (tests/bench/gpu.sh, small sizes): every section prints its rows,
# so a session with a GPU spends its time measuring, not debugging the bench.
T=$(mktemp -d /tmp/it_gpu_fake.XXXXXX)
trap 'rm -rf "$T"' EXIT
FAKENCCL_DIR=$T BENCH_GPU_QUICK=1 BENCH_STEPS=30 BENCH_BATCH=256 \
    BENCH_BIG="--hidden 64 --layers 2 --batch-size 64" BENCH_TRAIN=$B/fakecuda/ddptop-train \
    BENCH_GPU_BIN=$B/fakecuda/bench_gpu bash tests/bench/gpu.sh >"$T/bench.out" 2>&1
r3=$?
missing=""
for row in "gemm tf32  B=64 .* forward" "gemm tf32  B=64 .* backward" "gemm bf16 " \
           "bandwidth adamw" "bandwidth gelu_forward" "bandwidth gelu_backward" \
           "bandwidth embed_forward" "bandwidth softmax_xent_forward" \
           "tokens/s cpu, default model" "tokens/s cuda tf32, default model " \
           "tokens/s cuda bf16, --hidden 64" "tokens/s cuda fp32, --hidden 64" \
           "step default model bucket 1 MiB --overlap" "step default model bucket 25 MiB --no-overlap" \
           "allreduce W=2 4 MiB: 4 bucket(s) .*bucketed/plain throughput"; do
    grep -q -- "$row" "$T/bench.out" || missing="$missing [$row]"
done
if [ "$r3" = 0 ] && [ -z "$missing" ]; then
    echo "ok 101 - fakecuda: make bench-gpu's script runs to the end with every row"
else
    echo "not ok 101 - fakecuda: make bench-gpu's script runs to the end with every row"
    echo "# exit $r3, missing:$missing"
    tail -15 "$T/bench.out" | sed 's/^/# /'
fi
[ "$rc" = 0 ] && [ "$r2" = 0 ] && [ "$r3" = 0 ] && [ -z "$missing" ]
