#!/usr/bin/env bash
# The GPU backend without a GPU: tests/gpu_train.sh run against the fakecuda build of
# ddptop-train (tests/fakecuda: the backend's own kernels, cuBLAS calls and NCCL handling
# running on the CPU behind a test double), with two fake GPUs so that the NCCL pair tests run
# too; then the kernel tests once more with every block's threads, and the blocks, in reverse
# order, which turns a missing __syncthreads that the forward order hides into a wrong result;
# the device choice with GPUs visible, too few of them, or too old; and the GPU benchmark script
# end to end at small sizes.
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

# The device choice where only a fake GPU can stand in: with GPUs visible, with fewer GPUs
# than ranks on the node, and with a GPU older than the build's sm_90.
T=$(mktemp -d /tmp/it_gpu_fake.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
FT=$B/fakecuda/ddptop-train
n=110
failed=0
check() {   # check NAME COND-EXIT-STATUS [detail file]
    n=$((n + 1))
    if [ "$2" = 0 ]; then echo "ok $n - fakecuda: $1"; return; fi
    echo "not ok $n - fakecuda: $1"
    failed=1
    [ -n "${3:-}" ] && sed 's/^/# /' "$3" | tail -5
}
"$FT" --steps 1 --log-every 1 >"$T/auto.out" 2>"$T/auto.err"
grep -q '"event":"start".*"device":"cuda"' "$T/auto.out"
check "the default device with a GPU visible is the GPU" $? "$T/auto.err"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RANK=0 WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) \
    timeout 30 "$FT" --device cuda --steps 1 >"$T/few.out" 2>"$T/few.err"
st=$?
[ "$st" = 2 ] && grep -q 'LOCAL_WORLD_SIZE=3 ranks on this node but 2 GPU(s) visible' "$T/few.err"
check "--device cuda with 3 ranks on a node of 2 GPUs: exit 2 naming both counts" $? "$T/few.err"

port=$(free_port)
pids=()
for i in 0 1 2; do
    RANK=$i WORLD_SIZE=3 LOCAL_RANK=$i LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 60 "$FT" --steps 2 --log-every 1 >"$T/cpu3.$i.out" 2>"$T/cpu3.$i.err" &
    pids+=($!); PIDS+=($!)
done
ok=0
for i in 0 1 2; do wait "${pids[i]}" || ok=1; done
for i in 0 1 2; do grep -q '"event":"start".*"device":"cpu"' "$T/cpu3.$i.out" || ok=1; done
grep -q '3 rank(s) on this node but 2 GPU(s) visible: training on the CPU' "$T/cpu3.0.err" || ok=1
! grep -q 'GPU(s) visible' "$T/cpu3.1.err" || ok=1   # the note once per node, from local rank 0
check "by default, 3 ranks on a node of 2 GPUs train on the CPU, with one note" $ok "$T/cpu3.0.err"

FAKECUDA_CC=8.0 "$FT" --device cuda --steps 1 >"$T/old.out" 2>"$T/old.err"
st=$?
[ "$st" = 1 ] && grep -q "compute capability 8.0.*NVCCFLAGS='-O2 -gencode arch=compute_80,code=sm_80'" "$T/old.err"
check "a GPU older than sm_90 is refused with the NVCCFLAGS to rebuild with" $? "$T/old.err"

# The GPU benchmark end to end (tests/bench/gpu.sh, small sizes): every section prints its rows,
# so a session with a GPU spends its time measuring, not debugging the bench.
# (not the PyTorch twin: on a GPU machine it would measure the real GPU beside the fake one)
FAKENCCL_DIR=$T BENCH_GPU_QUICK=1 BENCH_STEPS=30 BENCH_BATCH=256 BENCH_TWIN=0 \
    BENCH_BIG="--hidden 64 --layers 2 --batch-size 64" BENCH_TRAIN=$B/fakecuda/ddptop-train \
    BENCH_GPU_BIN=$B/fakecuda/bench_gpu bash tests/bench/gpu.sh >"$T/bench.out" 2>&1
r3=$?
missing=""
for row in "gemm tf32  B=64 .* forward" "gemm tf32  B=64 .* backward" "gemm bf16 " \
           "lt   tf32  B=64 .* forward  plain .* +bias+gelu .* without Lt" \
           "lt   bf16  B=64 .* backward plain .* +bgradb+dgelu .* without Lt" \
           "bandwidth adamw" "bandwidth gelu_forward" "bandwidth gelu_backward" \
           "bandwidth embed_forward" "bandwidth softmax_xent_forward" \
           "bandwidth adamw_bf16_shadow" "bandwidth gelu_forward_bf16" \
           "bandwidth embed_backward" "bandwidth softmax_xent_fused" \
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
[ "$rc" = 0 ] && [ "$r2" = 0 ] && [ "$r3" = 0 ] && [ -z "$missing" ] && [ "$failed" = 0 ]
