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

# ---- the NCCL part (issue 29) at BENCH_CHECK_NCCL_NODES simulated nodes (default "4 64") ----
# The agents' NCCL processes (`ddptop-agent --bench-nccl`, what bench_nccl starts) driven as the
# controller drives them: the world (every node, 2 ranks each), then 5 rounds of disjoint node
# pairs (the sampled mesh has 3 to 7), each pair's first node making the unique id. The GPUs and
# NCCL are the TEST DOUBLES (tests/fakecudart, tests/fakenccl): their all-reduce is a real ring
# over TCP on this machine's loopback, so the figures are what the mechanism costs here (start,
# bootstrap, ring set-up, BENCH_NCCL_MIB per all-reduce: 2 warm-up and 10 timed, as the
# controller asks), not a network's. Not through `ddptop check`: simulated nodes are one
# machine, which the bench measures once, and 64 distinct machines' memory measurements at
# once (512 MiB each) do not fit here.
B=${SCALE_BUILD:-$SCALE_ROOT/build}
F=$(mktemp -d "${TMPDIR:-/tmp}/ddptop-nccl-bench.XXXXXX")
for v in 13 12 11; do ln -s "$B/fakecudart/libcudart.so.12" "$F/libcudart.so.$v"; done
ln -s "$B/fakenccl/libnccl.so.2" "$F/libnccl.so.2"
mib=${BENCH_NCCL_MIB:-1}
bytes=$((mib * 1048576))
nccl_run() { # nccl_run RANKS RANK0 ID OUT: one node's NCCL process, its output in OUT
    LD_LIBRARY_PATH=$F NCCL_SOCKET_IFNAME=lo timeout 60 "$B/ddptop-agent" --bench-nccl "$1" "$2" 2 "$bytes" 2 10 "$3" >"$4" 2>/dev/null
}
nccl_comm() { # nccl_comm TAG NODE...: one communicator of those nodes, to its end
    local tag=$1 k=0 n; shift
    n=$#
    nccl_run $((2 * n)) 0 - "$F/$tag.0" &
    for _ in $(seq 1 200); do grep -q '^id ' "$F/$tag.0" 2>/dev/null && break; sleep 0.01; done
    local id
    id=$(awk '/^id /{print $2}' "$F/$tag.0")
    for ((k = 1; k < n; k++)); do nccl_run $((2 * n)) $((2 * k)) "$id" "$F/$tag.$k" & done
    wait
}
for n in ${BENCH_CHECK_NCCL_NODES:-4 64}; do
    t0=$(date +%s%N)
    nccl_comm world $(seq 0 $((n - 1)))
    t1=$(date +%s%N)
    world_us=$(awk '/^ok /{print $2}' "$F/world.0")
    for r in 0 1 2 3 4; do
        # round r: pairs (i, i + 1 + r) of nodes not yet in this round
        declare -A busy=()
        for ((i = 0; i < n; i++)); do
            j=$(((i + 1 + r) % n))
            [ -n "${busy[$i]:-}" ] || [ -n "${busy[$j]:-}" ] || [ "$i" -eq "$j" ] && continue
            busy[$i]=1 busy[$j]=1
            nccl_comm "p$r.$i" "$i" "$j" &
        done
        wait
        unset busy
    done
    t2=$(date +%s%N)
    pairs_ok=$(cat "$F"/p*.0 2>/dev/null | grep -c '^ok ')
    pairs_n=$(ls "$F"/p*.0 2>/dev/null | wc -l)
    echo "NCCL part, $n nodes x 2 fake GPUs, $mib MiB all-reduces: world $(secs_of "$t0" "$t1") s" \
        "(busbw $(echo "$world_us" | awk -v b="$bytes" -v r=$((2 * n)) '{ if ($1 > 0) printf "%.3f", b / ($1 / 1e6) / 1e9 * 2 * (r - 1) / r; else print "?" }') GB/s)," \
        "5 rounds of pairs $(secs_of "$t1" "$t2") s ($pairs_ok of $pairs_n pairs through)"
    rm -f "$F"/world.* "$F"/p*
done
rm -rf "$F"
