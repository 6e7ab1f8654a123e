#!/usr/bin/env bash
# it_check_nccl: the measured preflight's NCCL all-reduce and dcgmi diag (`ddptop check --bench`,
# docs/check.md "Measured preflight"). Four "nodes", each a network namespace with its own sshd
# on one bridge (tests/lib/netns.sh), n2's link shaped to 50 Mbit/s both ways (tc tbf). The GPUs
# and NCCL are TEST DOUBLES found through LD_LIBRARY_PATH as the node's own would be: the fake
# CUDA runtime (tests/fakecudart, two fake H100 a node) and the fake NCCL (tests/fakenccl), whose
# all-reduce moves its bytes over real TCP between the namespaces, so the shaped link shows;
# dcgmi is a TEST DOUBLE script printing DCGM's JSON.
#   - the world's and each pair's bus bandwidth are in the text and --json; n2 is named slow
#     with a figure near its link's 50 Mbit/s, the others pass;
#   - a node whose NCCL init fails is named with NCCL's error, the others are stopped at once,
#     not left to wait for it; a node without GPUs among GPU nodes is left out, said so;
#     `ddptop run --bench --nnodes 3:4` leaves the failing node out and runs on the others;
#   - an agent stopped (SIGSTOP) during the NCCL phase is named within the deadline, no hang;
#   - no NCCL anywhere: one line says the NCCL part was not measured;
#   - --env's NCCL_* variables reach the agents' NCCL (an interface no node has: its error);
#   - --bench-dcgmi: the node whose dcgmi fails is named with the failing test.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/netns.sh
. tests/lib/check_run.sh

STOPPED=""
cleanup() {
    [ -n "$STOPPED" ] && kill -CONT $STOPPED 2>/dev/null
    check_run_cleanup
    sshd_cleanup
    netns_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

B=${DDPTOP_BUILD:-$PWD/build}
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
if ! netns_setup 4; then tap_fail "four namespaces on a bridge"; tap_done; exit; fi
A=("${NETNS_ADDR[@]}")

# The test doubles under the names the agent tries first: LD_LIBRARY_PATH is searched before the
# system's cache, where this machine's real CUDA runtime and NCCL are.
mkdir -p "$D/fake"
for v in 13 12 11; do
    ln -s "$B/fakecudart/libcudart.so.12" "$D/fake/libcudart.so.$v"
    ln -s "$B/fakecudart/libcublas.so.12" "$D/fake/libcublas.so.$v"
done
ln -s "$B/fakecudart/libcudart.so.12" "$D/fake/libcudart.so"
ln -s "$B/fakenccl/libnccl.so.2" "$D/fake/libnccl.so.2"
# dcgmi, a TEST DOUBLE of DCGM's command: `dcgmi diag -r 1 -j` prints a result in DCGM's JSON
# (test_categories > tests > results > status); FAKE_DCGMI_FAIL names a test that fails.
mkdir -p "$D/dcgm"
cat >"$D/dcgm/dcgmi" <<'EOF'
#!/bin/sh
# TEST DOUBLE of NVIDIA DCGM's dcgmi (it_check_nccl.sh): only `diag -r 1 -j`.
[ "$1 $2 $3 $4" = "diag -r 1 -j" ] || { echo "fake dcgmi: diag -r 1 -j only" >&2; exit 2; }
st=Pass; [ -n "${FAKE_DCGMI_FAIL:-}" ] && st=Fail
cat <<JSON
{"DCGM GPU Diagnostic": {"test_categories": [
 {"category": "Deployment", "tests": [
  {"name": "Denylist", "results": [{"gpu_id": "0", "status": "Pass"}, {"gpu_id": "1", "status": "Pass"}]},
  {"name": "${FAKE_DCGMI_FAIL:-NVML Library}", "results": [{"gpu_id": "0", "status": "Pass"},
    {"gpu_id": "1", "status": "$st", "warnings": [{"warning": "GPU 1 is not healthy (a test double)", "error_id": 30}]}]},
  {"name": "Persistence Mode", "results": [{"gpu_id": "0", "status": "Skip"}]}]}]},
 "version": "3.3.5"}
JSON
EOF
chmod 755 "$D/dcgm/dcgmi"
chmod 700 "$D/dcgm"

for i in 0 1 2 3; do
    cat /proc/sys/kernel/random/uuid >"$D/boot$i"
    printf '#!/bin/sh\nmount --bind %s /proc/sys/kernel/random/boot_id && exec /usr/sbin/sshd "$@"\n' \
        "$D/boot$i" >"$D/sshd$i"
    chmod 755 "$D/sshd$i"
done
# node_start I [VAR=VALUE ...]: node I's sshd (again), its agents with the doubles and those variables
node_start() {
    local i=$1; shift
    [ -n "${NODE_SSHD[i]:-}" ] && sshd_stop "${NODE_SSHD[i]}"
    SSHD_BIN=$D/sshd$i
    sshd_start "n$i" "${A[i]}" 22 --netns "${NETNS_NODE[i]}" \
        "SetEnv LD_LIBRARY_PATH=$D/fake PATH=$D/dcgm:/usr/bin:/bin $*" || return 1
    NODE_SSHD[i]=$SSHD_LAST_PID
    SSHD_BIN=/usr/sbin/sshd
}
NODE_SSHD=()
for i in 0 1 2 3; do
    if ! node_start $i; then tap_fail "sshd in namespace $i"; tap_done; exit; fi
    sshd_known_hosts_line "${A[i]}" 22 >>"$D/known_hosts"
done
printf 'root@%s\n' "${A[@]}" >"$D/hosts.txt"
ARGS=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent" --timeout 5
      --bench-seconds 0.5 --bench-nccl-mib 1)

shape() {
    ip netns exec "${NETNS_NODE[2]}" tc qdisc add dev eth0 root tbf rate 50mbit burst 32kbit latency 400ms &&
        ip netns exec "$NETNS_SWITCH" tc qdisc add dev p2 root tbf rate 50mbit burst 32kbit latency 400ms
}
unshape() {
    ip netns exec "${NETNS_NODE[2]}" tc qdisc del dev eth0 root 2>/dev/null
    ip netns exec "$NETNS_SWITCH" tc qdisc del dev p2 root 2>/dev/null
}
if shape; then tap_ok "n2's link shaped to 50 Mbit/s (tc tbf, both ways)"
else tap_fail "n2's link shaped to 50 Mbit/s (tc tbf)"; fi

# ---- the world and the pairs, n2 slow ----
run_check "$D/n.json" "$D/hosts.txt" --json --bench "${ARGS[@]}"
expect_rc "check --bench with NCCL: the slow node fails the check" 1
# n2's pairs: 2 nodes x 2 GPUs, the ring crosses the 50 Mbit/s link once each way: busbw is the
# link's 6.25 MB/s (0.00625 GB/s), give or take the shaper's burst
jassert "NCCL: the world's figures; n2 named slow with its busbw near 50 Mbit/s; the others not" "$D/n.json" \
    "d['bench']['nccl']['world']['ranks'] == 8 and d['bench']['nccl']['world']['nodes'] == 4" \
    "d['bench']['nccl']['world']['busbw_gbs'] > 0 and d['bench']['nccl']['world']['error'] is None" \
    "d['bench']['nccl']['world']['bytes'] == 1048576" \
    "abs(d['bench']['nccl']['world']['busbw_gbs'] - d['bench']['nccl']['world']['algbw_gbs'] * 2 * 7 / 8) < 0.002" \
    "ck(2, 'bench')['nccl']['slow'] is True and 0.002 <= ck(2, 'bench')['nccl']['busbw_gbs'] <= 0.0125" \
    "all(ck(k, 'bench')['nccl']['slow'] is False for k in (0, 1, 3))" \
    "all(ck(k, 'bench')['nccl']['busbw_gbs'] > 10 * ck(2, 'bench')['nccl']['busbw_gbs'] for k in (0, 1, 3))" \
    "'NCCL all-reduce with its peers: busbw' in ck(2, 'bench')['detail'] or '; and ' in ck(2, 'bench')['detail']"
jassert "NCCL --json: every pair with its busbw, the slow ones marked; the median" "$D/n.json" \
    "len(d['bench']['nccl']['pairs']) >= 4" \
    "all(p['error'] is None and p['busbw_gbs'] > 0 for p in d['bench']['nccl']['pairs'])" \
    "all(p['slow'] == ('${A[2]}' in (p['a'], p['b'])) for p in d['bench']['nccl']['pairs'])" \
    "d['bench']['nccl']['median_pair_busbw_gbs'] > 0 and d['bench']['nccl']['skipped'] is None" \
    "all(len(ck(k, 'bench')['nccl']['pairs']) >= 2 for k in range(4))"
# a passing node's words (its BENCH detail in --json and with --all) say the world's figure
jassert "a passing node's BENCH detail: NCCL all-reduce 4 nodes x 2 GPUs: busbw ..., with its peers ..." "$D/n.json" \
    "all('; NCCL all-reduce 4 nodes x 2 GPUs: busbw ' in ck(k, 'bench')['detail'] and ' GB/s, with its peers ' in ck(k, 'bench')['detail'] for k in (0, 1, 3) if st(k, 'bench') == 'pass')" \
    "any(st(k, 'bench') == 'pass' for k in (0, 1, 3))"
run_check "$D/n.txt" "$D/hosts.txt" --bench "${ARGS[@]}"
if grep -Eq "^${A[2]//./\\.} +bench +fail .*NCCL all-reduce with its peers: busbw 0\.0[01][0-9]* GB/s, median [0-9.]+ GB/s" "$D/n.txt"; then
    tap_ok "the text report names n2: NCCL all-reduce with its peers: busbw ..., median ..."
else
    tap_fail "the text report names n2 with its NCCL busbw" "$(cat "$D/n.txt")"
fi
sed 's/^/#   /' "$D/n.txt"
unshape

# ---- NCCL init failing on n3, no GPU on n0 ----
node_start 3 DDPTOP_FAKE_NCCL_FAIL=1 || tap_fail "n3's sshd again"
node_start 0 DDPTOP_FAKE_CUDART_GPUS=0 || tap_fail "n0's sshd again"
run_check "$D/f.json" "$D/hosts.txt" --json --bench "${ARGS[@]}"
jassert "NCCL init failing on n3 is named with NCCL's error; n0 without GPUs is left out, said so" "$D/f.json" \
    "st(3, 'bench') == 'fail' and 'NCCL all-reduce of the world failed here: ncclCommInitRank: unhandled system error' in ck(3, 'bench')['detail']" \
    "'DDPTOP_FAKE_NCCL_FAIL' in ck(3, 'bench')['nccl']['world_error']" \
    "'no GPU here: left out of the NCCL all-reduce' in ck(0, 'bench')['detail'] and ck(0, 'bench')['nccl'] is None" \
    "d['bench']['nccl']['world']['ranks'] == 6 and 'unhandled system error' in d['bench']['nccl']['world']['error']" \
    "st(1, 'bench') != 'fail' and st(2, 'bench') != 'fail'" \
    "ck(1, 'bench')['nccl']['world_error'].startswith('stopped: NCCL failed on ${A[3]}')" \
    "any(p['a'] == '${A[1]}' and p['b'] == '${A[2]}' and p['busbw_gbs'] > 0 for p in d['bench']['nccl']['pairs'])" \
    "all('${A[3]}' not in (p['a'], p['b']) for p in d['bench']['nccl']['pairs'])"
# the failed init stops the others at once: far below the agents' 30 s deadline
if [ "$ELAPSED_MS" -lt 40000 ]; then tap_ok "a failed init ends the world at once (${ELAPSED_MS} ms in all)"
else tap_fail "a failed init ends the world at once" "${ELAPSED_MS} ms"; fi

# ddptop run --bench with a spare: n3, whose NCCL fails, is left out (the event says why) and the
# job runs on the other three
NO_COLOR=1 CUDA_VISIBLE_DEVICES= timeout -k 5 180 "$DDPTOP" run "$D/hosts.txt" --bench --nnodes 3:4 --headless \
    --nproc-per-node 1 --log-dir "$D/runs" --run-id rn "${ARGS[@]}" -- /bin/sh -c 'echo "ran on node $NODE_RANK of $NNODES"' \
    >"$D/run.out" 2>&1 </dev/null
RC=$?
if [ "$RC" -eq 0 ] && [ "$(grep -c 'ran on node [0-2] of 3' "$D/run.out")" -eq 3 ] &&
    grep -q "excluded.*${A[3]//./\\.}.*its measurement failed (--bench): NCCL all-reduce of the world failed here: ncclCommInitRank" "$D/runs/rn/events.jsonl"; then
    tap_ok "run --bench --nnodes 3:4: n3, whose NCCL init fails, is excluded (the event says why); the other three run"
else
    tap_fail "run --bench --nnodes 3:4 leaves n3 out" "rc $RC" "$(tail -20 "$D/run.out")" "$(grep -i exclu "$D/runs/rn/events.jsonl" 2>/dev/null | head -3)"
fi

# ---- no NCCL anywhere: one line says why ----
for i in 0 1 2 3; do node_start $i DDPTOP_FAKE_NCCL_ABSENT=1 || tap_fail "n$i's sshd again"; done
run_check "$D/none.json" "$D/hosts.txt" --json --bench "${ARGS[@]}"
NONE_MS=$ELAPSED_MS
jassert "no NCCL on any node: the NCCL part is skipped, saying why" "$D/none.json" \
    "d['bench']['nccl']['skipped'] == 'no node has NCCL (libnccl.so.2 not found)' and d['bench']['nccl']['world'] is None" \
    "all('NCCL not measured: no node has NCCL (libnccl.so.2 not found)' in ck(k, 'bench')['detail'] for k in range(4))" \
    "all(st(k, 'bench') == 'pass' for k in range(4))"

# ---- --bench-dcgmi: n1's dcgmi fails a test ----
for i in 0 2 3; do node_start $i || tap_fail "n$i's sshd again"; done
node_start 1 FAKE_DCGMI_FAIL=Diagnostic_Memory || tap_fail "n1's sshd again"
run_check "$D/dcgm.json" "$D/hosts.txt" --json --bench --bench-dcgmi "${ARGS[@]}"
# what the NCCL part adds here (the same bench without NCCL before; dcgmi runs beside the rest)
echo "# cost: check --bench without NCCL ${NONE_MS} ms, with NCCL (1 MiB) and --bench-dcgmi ${ELAPSED_MS} ms, 4 nodes, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
jassert "--bench-dcgmi: n1's failing dcgmi test is named, the others pass" "$D/dcgm.json" \
    "st(1, 'bench') == 'fail' and 'dcgmi diag -r 1 failed: Diagnostic_Memory on GPU 1: GPU 1 is not healthy' in ck(1, 'bench')['detail']" \
    "ck(1, 'bench')['dcgmi']['status'] == 'fail' and ck(1, 'bench')['dcgmi']['failed'][0].startswith('Diagnostic_Memory on GPU 1')" \
    "all(ck(k, 'bench')['dcgmi']['status'] == 'pass' and 'dcgmi' not in ck(k, 'bench')['detail'] for k in (0, 2, 3))"
jassert "without --bench-dcgmi nothing of dcgmi is said" "$D/none.json" \
    "all(ck(k, 'bench')['dcgmi'] is None for k in range(4))"

# ---- --env's NCCL variables reach NCCL: an interface that no node has ----
run_check "$D/env.json" "$D/hosts.txt" --json --bench --env NCCL_SOCKET_IFNAME=nosuch0 "${ARGS[@]}"
jassert "--env NCCL_SOCKET_IFNAME reaches the agents' NCCL: the first node says NCCL's bootstrap error" "$D/env.json" \
    "'NCCL all-reduce of the world failed here: ncclGetUniqueId: unhandled system error' in ck(0, 'bench')['detail']" \
    "'no socket interface found' in ck(0, 'bench')['nccl']['world_error']" \
    "ck(1, 'bench')['nccl']['world_error'].startswith('not started: the first node could not start NCCL')"
if [ "$ELAPSED_MS" -lt 40000 ]; then tap_ok "NCCL failing at once everywhere ends at once (${ELAPSED_MS} ms in all)"
else tap_fail "NCCL failing at once everywhere ends at once" "${ELAPSED_MS} ms"; fi

# ---- an agent stopped during the NCCL phase: named within the deadline, no hang ----
t0=$(date +%s)
NO_COLOR=1 timeout -k 5 150 "$DDPTOP" check "$D/hosts.txt" --json --bench -v "${ARGS[@]}" >"$D/stop.json" 2>"$D/stop.err" </dev/null &
RUN_PID=$!
stopped_it=""
for _ in $(seq 1 600); do
    if grep -q 'bench: NCCL all-reduce of the world' "$D/stop.err" 2>/dev/null; then
        STOPPED=$(ip netns pids "${NETNS_NODE[1]}" | while read -r p; do
            case "$(cat /proc/$p/comm 2>/dev/null)" in ddptop-agent*) echo "$p" ;; esac; done | head -1)
        [ -n "$STOPPED" ] && kill -STOP "$STOPPED" && stopped_it=1
        break
    fi
    sleep 0.1
done
wait "$RUN_PID"
RC=$?
RUN_PID=""
secs=$(($(date +%s) - t0))
[ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null
STOPPED=""
if [ -n "$stopped_it" ] && [ "$RC" -eq 1 ] && [ "$secs" -lt 120 ]; then
    tap_ok "an agent stopped during the NCCL all-reduce: the check ends in ${secs} s (exit $RC)"
else
    tap_fail "an agent stopped during the NCCL all-reduce: the check ends in bounded time" "stopped: ${stopped_it:-no}, rc $RC, ${secs} s" "$(tail -5 "$D/stop.err")"
fi
jassert "the stopped node fails with what its NCCL met; the others are not blamed" "$D/stop.json" \
    "st(1, 'bench') == 'fail' or st(1, 'ssh') == 'fail'" \
    "ck(1, 'bench')['nccl'] is None or 'no answer' in (ck(1, 'bench')['nccl']['world_error'] or '') or ck(1, 'bench')['nccl']['world_error'] is None" \
    "all(st(k, 'bench') != 'fail' for k in (0, 2, 3))"

tap_done
