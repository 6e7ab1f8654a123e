#!/usr/bin/env bash
# Benchmark (issue 29): what the measured preflight costs, on the scale test bed (tests/lib/
# scale.sh: simulated nodes n0001.. on 127.0.0.1 in a private mount namespace, agents through
# the pbs_tmrsh TEST DOUBLE). For each of BENCH_CHECK_NODES (default "64 1024"): the wall time
# of `ddptop check --pbs` without and with --bench, side by side in one run, the bench's plan
# (rounds, transfers) and its median figures. On one machine every node's transfers share its
# cores and its loopback, so the figures say nothing of a network: the times say what the
# measurement adds at that scale (the goals: 64 nodes' network part under 30 s, 1,024 under 2
# minutes). Rerun with `make bench BENCH_PARTS=check_bench`.
set -u
. "$(dirname "$0")/../lib/scale.sh"
scale_bed_reexec "$@"
cd "$SCALE_ROOT" || exit 1
trap 'scale_bed_stop' EXIT
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=

secs_of() { echo "$1 $2" | awk '{printf "%.1f", ($2 - $1) / 1e9}'; }

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null)"
for n in ${BENCH_CHECK_NODES:-64 1024}; do
    scale_bed_stop
    if ! scale_bed_start "$n" 1; then echo "bench: the scale bed did not start ($n nodes)"; exit 1; fi
    D=$SCALE_DIR
    t0=$(date +%s%N)
    "$SCALE_DDPTOP" check --pbs --json >"$D/plain.json" 2>/dev/null </dev/null
    t1=$(date +%s%N)
    "$SCALE_DDPTOP" check --pbs --bench --json -v >"$D/bench.json" 2>"$D/bench.err" </dev/null
    t2=$(date +%s%N)
    plain=$(secs_of "$t0" "$t1")
    bench=$(secs_of "$t1" "$t2")
    # when the transfers began and ended, from -v's phase lines (their times are ours)
    /usr/bin/python3 - "$D/bench.json" "$n" "$plain" "$bench" <<'PY'
import json, sys
d, n, plain, bench = json.load(open(sys.argv[1])), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
b = d.get("bench") or {}
H = d["hosts"]
ok = sum(t["error"] is None for h in H for t in h["checks"]["bench"]["transfers"])
print(f"{n:5d} nodes: check {plain:6.1f} s, check --bench {bench:6.1f} s (+{bench - plain:.1f} s: "
      f"{b.get('rounds')} rounds, {b.get('transfers')} transfers, {ok} through, "
      f"median {b.get('median_gbps')} Gb/s, round trip {b.get('median_rtt_ms')} ms, "
      f"CPU memory {b.get('median_cpu_mem_gbs')} GB/s measured once for the machine)")
PY
done
