#!/usr/bin/env bash
# Training throughput of ddptop-train on this machine: tokens/s for 1, 2 and 4 local ranks with
# the default model, and the share of step time spent waiting on gradient communication with and
# without overlap (--no-overlap), for the default 25 MiB bucket (one bucket for this model) and
# 1 MiB buckets (four buckets, so all-reduce can overlap backward). Prints a table; the figures
# go into docs/performance.md, section "ddptop-train (CPU)". BENCH_STEPS sets the steps per run,
# BENCH_REPEAT how often each configuration runs (the row shows the fastest run: on a shared
# machine the fastest is the one least disturbed by others).
set -u
cd "$(dirname "$0")/../.."
TRAIN=${DDPTOP_BUILD:-$PWD/build}/ddptop-train
export CUDA_VISIBLE_DEVICES=   # the CPU figures; tests/bench/gpu.sh measures the GPU
STEPS=${BENCH_STEPS:-120}
REPEAT=${BENCH_REPEAT:-3}
WARMUP=20
PY=/usr/bin/python3
T=$(mktemp -d /tmp/bench_train.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"' EXIT
[ -x "$TRAIN" ] || { echo "bench/train: $TRAIN not built" >&2; exit 1; }

free_port() {
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# run_once W LABEL ARGS...: one run of W local ranks; prints a table row from rank 0's lines.
run_once() {
    local w=$1 label=$2; shift 2
    local port; port=$(free_port)
    local pids=()
    for ((i = 0; i < w; i++)); do
        RANK=$i WORLD_SIZE=$w LOCAL_RANK=$i LOCAL_WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port "$TRAIN" --steps "$STEPS" --log-every 10 "$@" \
            >"$T/r$i.out" 2>"$T/r$i.err" &
        pids+=($!); PIDS+=($!)
    done
    local rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    if [ $rc -ne 0 ]; then
        echo "bench/train: run '$label' with $w ranks failed:" >&2
        cat "$T"/r*.err >&2
        return 1
    fi
    $PY - "$T/r0.out" "$w" "$label" "$WARMUP" <<'PYEOF'
import json, sys
path, w, label, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rows = [o for o in map(json.loads, open(path)) if o["event"] == "step" and o["step"] > warm]
n = len(rows)
step = sum(r["step_ms"] for r in rows) / n
comm = sum(r["comm_ms"] for r in rows) / n
wait = sum(r["wait_ms"] for r in rows) / n
batch = 64
print(f"| {w} | {label:<22} | {batch * w * 1000 / step:9.0f} | {step:8.2f} | {comm:8.2f} | "
      f"{wait:8.2f} | {100 * wait / step:5.1f}% |")
PYEOF
}

# run W LABEL ARGS...: REPEAT runs, prints the row of the fastest.
run() {
    local rows="" row
    for ((k = 0; k < REPEAT; k++)); do
        row=$(run_once "$@") || return 1
        rows+="$row"$'\n'
    done
    printf '%s' "$rows" | sort -t'|' -k4,4nr | head -1
}

echo "ddptop-train (CPU), default model, batch 64 per rank, $STEPS steps (first $WARMUP not counted), best of $REPEAT"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)," \
     "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| ranks | all-reduce | tokens/s | step ms | comm ms | wait ms | wait/step |"
echo "|---|---|---|---|---|---|---|"
run 1 "none (world of 1)" || exit 1
for w in 2 4; do
    run $w "25 MiB (one bucket)" || exit 1
    run $w "1 MiB, overlap" --bucket-mb 1 || exit 1
    run $w "1 MiB, --no-overlap" --bucket-mb 1 --no-overlap || exit 1
done
echo
echo "tokens/s: samples per step of all ranks / mean step time of rank 0. comm ms: time inside"
echo "collectives (the ring's own clock, overlapped or not); wait ms: step time blocked on"
echo "communication (starting buckets + comm_wait_all), i.e. the part overlap did not hide."
echo "The default model's 4 MiB of gradients fit one 25 MiB bucket, which can only start after"
echo "backward: overlap needs smaller buckets (1 MiB: four buckets)."
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
