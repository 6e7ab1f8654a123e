#!/usr/bin/env bash
# Ring all-reduce bus bandwidth for 2 and 4 local ranks, side by side with PyTorch's gloo on
# the same machine, and the ratio ours/gloo per size (median over the timed iterations).
# Needs $BUILD/bench/bench_allreduce (make bench-programs). gloo runs from Debian's
# python3-torch under /usr/bin/python3; without it that column says n/a.
# Env: BENCH_WORLDS ("2 4"), BENCH_MIN_MIB (1), BENCH_MAX_MIB (256), BENCH_FACTOR (4),
#      BENCH_ITERS (5), BENCH_ROUNDS (2), PYTHON (/usr/bin/python3).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
bin=$BUILD/bench/bench_allreduce
worlds=${BENCH_WORLDS:-2 4}
min=${BENCH_MIN_MIB:-1} max=${BENCH_MAX_MIB:-256} factor=${BENCH_FACTOR:-4}
iters=${BENCH_ITERS:-5}
py=${PYTHON:-/usr/bin/python3}
[ -x "$bin" ] || { echo "allreduce.sh: $bin is missing; run make BUILD=$BUILD bench-programs" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

have_torch=0
if "$py" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
    have_torch=1
else
    echo "# gloo: 'import torch' failed under $py (apt-get install python3-torch); gloo column is n/a"
fi

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }

# The machine may be shared: ring and gloo take turns, ROUNDS times each, and each size keeps
# the best of its per-round medians, so a burst of someone else's load hits both alike.
rounds=${BENCH_ROUNDS:-2}
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds x $iters iterations"
for w in $worlds; do
    for ((round = 0; round < rounds; round++)); do
        "$bin" -w "$w" -m "$min" -M "$max" -f "$factor" -n "$iters" >>"$tmp/ring$w.all" ||
            echo "# ring W=$w failed"
        [ $have_torch = 1 ] || continue
        port=$(free_port)
        pids=()
        for ((r = 0; r < w; r++)); do
            RANK=$r WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
                "$py" tests/bench/gloo_allreduce.py "$min" "$max" "$factor" "$iters" \
                >"$tmp/gloo$w.$r" 2>"$tmp/gloo$w.$r.err" &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || echo "# gloo W=$w: a rank failed: $(tail -1 "$tmp"/gloo$w.*.err)"; done
        pids=()
        cat "$tmp/gloo$w.0" >>"$tmp/gloo$w.all"
    done
done

# Per size: the line of the round with the highest median bus bandwidth.
best_rounds() {
    [ -s "$1" ] || return 0
    awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
           b = v["bytes"]; if (!(b in best) || v["busbw_median"] + 0 > best[b]) { best[b] = v["busbw_median"] + 0; line[b] = $0 }
           if (!(b in seen)) { seen[b] = 1; order[n++] = b } }
         END { for (i = 0; i < n; i++) print line[order[i]] }' "$1"
}
for w in $worlds; do
    best_rounds "$tmp/ring$w.all" >"$tmp/ring$w"
    best_rounds "$tmp/gloo$w.all" >"$tmp/gloo$w"
done

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
printf '%-3s %9s  %14s %14s  %14s %14s  %7s\n' W size "ring GB/s med" "ring GB/s best" \
    "gloo GB/s med" "gloo GB/s best" "ratio"
for w in $worlds; do
    while read -r line; do
        b=$(echo "$line" | field bytes)
        rm_=$(echo "$line" | field busbw_median) rb=$(echo "$line" | field busbw_best)
        gm=n/a gb=n/a ratio=n/a
        if [ -s "$tmp/gloo$w" ]; then
            g=$(grep " bytes=$b " "$tmp/gloo$w")
            if [ -n "$g" ]; then
                gm=$(echo "$g" | field busbw_median) gb=$(echo "$g" | field busbw_best)
                ratio=$(awk -v a="$rm_" -v b="$gm" 'BEGIN { printf "%.2fx", a / b }')
            fi
        fi
        printf '%-3s %6s MiB  %14s %14s  %14s %14s  %7s\n' "$w" $((b >> 20)) "$rm_" "$rb" \
            "$gm" "$gb" "$ratio"
    done <"$tmp/ring$w"
done
