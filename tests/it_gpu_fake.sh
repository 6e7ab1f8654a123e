#!/usr/bin/env bash
# The GPU backend without a GPU: tests/gpu_train.sh run against the fakecuda build of
# ddptop-train (tests/fakecuda: the backend's own kernels, cuBLAS calls and NCCL handling
# running on the CPU behind a test double), with two fake GPUs so that the NCCL pair tests run
# too; then the kernel tests once more with every block's threads, and the blocks, in reverse
# order, which turns a missing __syncthreads that the forward order hides into a wrong result.
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
[ "$rc" = 0 ] && [ "$r2" = 0 ]
