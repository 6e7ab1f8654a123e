#!/usr/bin/env bash
# GPU figures (make bench-gpu; make bench runs it too): the matrix products through ops_cuda
# against cuBLAS alone, the memory-bound kernels as a fraction of HBM peak, ddptop-train's
# tokens/s on GPU (and CPU for scale), and with 2 or more GPUs the step time with overlapped
# against serialized gradient communication and the bucketed all-reduce against one plain
# ncclAllReduce of the same bytes. The figures go into docs/performance.md, section
# "ddptop-train (GPU)", with the device and the date. Without a GPU it prints
# "no GPU: skipped (...)" and succeeds.
# Env: BENCH_STEPS (200) steps per training run, BENCH_GPUS (all visible) ranks for the
# multi-GPU parts, DDPTOP_HBM_PEAK_TBS to override the HBM peak; BENCH_TRAIN and BENCH_GPU_BIN
# other builds of the two programs, BENCH_KERNELS=0 leaves the kernels' table out, BENCH_BIG the large model's options, BENCH_BATCH the large batch (4096), BENCH_GPU_QUICK=1 small
# sizes (tests/it_gpu_fake.sh runs this whole script on fakecuda that way).
# The PyTorch twin (tests/bench/torch_twin.py, the same model, data and optimizer in PyTorch)
# runs the five configurations of ddptop-train's tokens/s table, eager, when a python3 with
# torch and CUDA is there, and torch.compile (default mode) on two of them (default model
# batch BENCH_BATCH tf32, the big model bf16; BENCH_TWIN_COMPILE=all: on all five, 0: none),
# each line with ddptop-train's ratio to it; without one it says why it was skipped.
# BENCH_TWIN=0 leaves it out.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
DDPTOP_BUILD=${DDPTOP_BUILD:-$PWD/$BUILD}
TRAIN=${BENCH_TRAIN:-$DDPTOP_BUILD/ddptop-train}
BIN=${BENCH_GPU_BIN:-$DDPTOP_BUILD/bench/bench_gpu}
STEPS=${BENCH_STEPS:-200}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3   # a GPU machine's image may keep it elsewhere
T=$(mktemp -d /tmp/bench_gpu.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"' EXIT

# The twin's python3: the first that imports torch (a GPU machine's image keeps it on PATH).
TWIN_PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then TWIN_PY=$p; break; fi
done
# twin_skip_why: empty when the twin can run, else why not
twin_skip_why() {
    [ "${BENCH_TWIN:-1}" != 0 ] || { echo "BENCH_TWIN=0"; return; }
    [ -n "$TWIN_PY" ] || { echo "no python3 with torch"; return; }
    "$TWIN_PY" -c 'import torch
if not torch.cuda.is_available():
    print("torch %s sees no CUDA device (torch.cuda.is_available() is False)" % torch.__version__)' 2>&1 | tail -1
}
if [ ! -x "$BIN" ]; then
    echo "no GPU: skipped (no CUDA in this build: $BIN not built; make bench-programs with CUDA)"
    echo "torch twin: skipped ($(twin_skip_why | grep . || echo "no GPU"))"
    exit 0
fi
probe=$("$BIN" probe 2>&1 | head -1)
case $probe in "no GPU: skipped"*)
    echo "$probe"
    echo "torch twin: skipped ($(twin_skip_why | grep . || echo "no GPU"))"
    exit 0 ;;
esac
[ -x "$TRAIN" ] || { echo "bench/gpu: $TRAIN not built" >&2; exit 1; }

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

if [ "${BENCH_KERNELS:-1}" != 0 ]; then
    echo "== kernels (tf32), then the matrix products in bf16"
    "$BIN" kernels tf32 || exit 1
    "$BIN" kernels bf16 | grep -E '^(gemm|lt) ' || exit 1
fi

# tokens LABEL ARGS...: mean tokens/s and step time after the first 20 steps of one rank; the
# figure is kept in TOKENS[LABEL] for the twin's ratios.
declare -A TOKENS
tokens() {
    local label=$1; shift
    if ! "$TRAIN" --steps "$STEPS" --log-every 10 "$@" >"$T/t.out" 2>"$T/t.err"; then
        echo "bench/gpu: ddptop-train $* failed:" >&2; cat "$T/t.err" >&2; return 1
    fi
    $PY - "$T/t.out" "$label" >"$T/t.row" <<'PYEOF'
import json, sys
rows = [o for o in map(json.loads, open(sys.argv[1])) if o["event"] == "step" and o["step"] > 20]
n = len(rows)
print("tokens/s %-44s %12.0f tokens/s  %8.3f ms/step" % (sys.argv[2],
      sum(r["tokens_per_s"] for r in rows) / n, sum(r["step_ms"] for r in rows) / n))
PYEOF
    cat "$T/t.row"
    TOKENS[$label]=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "tokens/s") v = $i} END {print v}' "$T/t.row")
}
# twin LABEL [--compile] ARGS...: the PyTorch twin on the same configuration, with ddptop-train's
# ratio to it (TOKENS[LABEL] / the twin's tokens/s).
twin() {
    local label=$1 kind="torch" warm=20; shift
    [ "$1" = --compile ] && kind="torch.compile" warm=50
    [ "$warm" -lt "$STEPS" ] || warm=$((STEPS / 2))
    if ! "$TWIN_PY" tests/bench/torch_twin.py --device cuda --steps "$STEPS" --warmup "$warm" --label "$label" "$@" \
            >"$T/twin.out" 2>"$T/twin.err"; then
        echo "bench/gpu: torch_twin.py $* failed:" >&2; tail -5 "$T/twin.err" >&2; return 1
    fi
    $PY - "$T/twin.out" "$kind" "$label" "${TOKENS[$label]:-}" <<'PYEOF'
import json, sys
o = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
ours = float(sys.argv[4]) if sys.argv[4] else None
ratio = ("ddptop-train %.2fx" % (ours / o["tokens_per_s"])) if ours and o["tokens_per_s"] else "no ddptop-train figure"
print("%-13s %-44s %12.0f tokens/s  %8.3f ms/step  %s" % (sys.argv[2], sys.argv[3], o["tokens_per_s"],
      o["step_ms"], ratio))
PYEOF
}
BIG=${BENCH_BIG:-"--hidden 4096 --layers 4 --batch-size 4096"}
echo "== ddptop-train, one rank (a token is one predicted byte)"
tokens "cpu, default model"                --device cpu || exit 1
tokens "cuda tf32, default model"          --device cuda --precision tf32 || exit 1
WIDE=${BENCH_BATCH:-4096}
tokens "cuda tf32, default model, batch $WIDE" --device cuda --precision tf32 --batch-size "$WIDE" || exit 1
tokens "cuda tf32, $BIG"                   --device cuda --precision tf32 $BIG || exit 1
tokens "cuda bf16, $BIG"                   --device cuda --precision bf16 $BIG || exit 1
tokens "cuda fp32, $BIG"                   --device cuda --precision fp32 $BIG || exit 1
# the A/B of ops_cuda_lt_fuse: every heavy cuBLASLt epilogue at every size, as before the rule
DDPTOP_CUBLASLT=fuse tokens "cuda tf32, $BIG, every epilogue fused" --device cuda --precision tf32 $BIG || exit 1
DDPTOP_CUBLASLT=fuse tokens "cuda bf16, $BIG, every epilogue fused" --device cuda --precision bf16 $BIG || exit 1

why=$(twin_skip_why)
if [ -n "$why" ]; then
    echo "== the PyTorch twin: skipped ($why)"
else
    echo "== the PyTorch twin (tests/bench/torch_twin.py, $("$TWIN_PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))')): eager, then torch.compile"
    # the same five configurations: label, then the twin's arguments
    cfgs=("cuda tf32, default model|--precision tf32"
          "cuda tf32, default model, batch $WIDE|--precision tf32 --batch-size $WIDE"
          "cuda tf32, $BIG|--precision tf32 $BIG"
          "cuda bf16, $BIG|--precision bf16 $BIG"
          "cuda fp32, $BIG|--precision fp32 $BIG")
    for c in "${cfgs[@]}"; do
        twin "${c%%|*}" ${c#*|} || exit 1
    done
    for c in "${cfgs[@]}"; do
        case ${BENCH_TWIN_COMPILE:-two} in
            0) continue ;;
            all) ;;
            *) [ "${c%%|*}" = "cuda tf32, default model, batch $WIDE" ] || [ "${c%%|*}" = "cuda bf16, $BIG" ] || continue ;;
        esac
        twin "${c%%|*}" --compile ${c#*|} || exit 1
    done
fi

n_gpus=${BENCH_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ] && [ -z "${BENCH_GPUS:-}" ]; then
    n_gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
fi
if [ "$n_gpus" -lt 2 ]; then
    echo "== overlap and all-reduce: need 2 GPUs, $n_gpus visible: skipped"
    exit 0
fi
free_port() {
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# world W CMD...: W local ranks, one per GPU; rank i's output in $T/w.i.out
world() {
    local w=$1; shift
    local port pids=() rc=0
    port=$(free_port)
    for ((i = 0; i < w; i++)); do
        RANK=$i WORLD_SIZE=$w LOCAL_RANK=$i LOCAL_WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port "$@" >"$T/w.$i.out" 2>"$T/w.$i.err" &
        pids+=($!); PIDS+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || { echo "bench/gpu: $* with $w ranks failed:" >&2; cat "$T"/w.*.err >&2; }
    return $rc
}
step_row() {
    $PY - "$T/w.0.out" "$1" <<'PYEOF'
import json, sys
rows = [o for o in map(json.loads, open(sys.argv[1])) if o["event"] == "step" and o["step"] > 20]
n = len(rows)
f = lambda k: sum(r[k] for r in rows) / n
print("step %-52s %8.3f ms/step  wait %7.3f ms  comm %7.3f ms  %12.0f tokens/s" % (
      sys.argv[2], f("step_ms"), f("wait_ms"), f("comm_ms"), f("tokens_per_s")))
PYEOF
}
echo "== $n_gpus ranks, one GPU each (NCCL): overlapped against serialized communication"
for model in "" "$BIG"; do
    for mb in 1 25; do
        for ov in "" --no-overlap; do
            world "$n_gpus" "$TRAIN" --device cuda --steps "$STEPS" --log-every 10 \
                --bucket-mb $mb $ov $model || exit 1
            step_row "${model:-default model} bucket ${mb} MiB ${ov:---overlap}"
        done
    done
done
echo "== $n_gpus ranks: bucketed all-reduce (as the trainer) against one ncclAllReduce"
sizes=("4 1" "64 1" "256 25" "1024 25")
[ "${BENCH_GPU_QUICK:-0}" = 0 ] || sizes=("4 1")
for size in "${sizes[@]}"; do
    world "$n_gpus" "$BIN" allreduce $size || exit 1
    cat "$T/w.0.out"
done
