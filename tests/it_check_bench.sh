#!/usr/bin/env bash
# it_check_bench: the measured preflight (`ddptop check --bench`, docs/check.md "Measured
# preflight") over real traffic. Four "nodes", each a network namespace with its own sshd on one
# bridge (tests/lib/netns.sh); node n2's link shaped to 50 Mbit/s both ways with tc's tbf (on its
# eth0 and on its bridge port), the others at the veth's own speed. The GPUs are the test double
# of the CUDA runtime and cuBLAS (tests/fakecudart: two fake H100 per node, found through
# LD_LIBRARY_PATH as the node's own would be), one of n3's made slow; n0 has none (the real
# runtime without a GPU, or none at all).
#   - n2 is named slow with its figure (about 0.05 Gb/s) and the median; its neighbours are not;
#   - n3's slow GPU is named against the median of the 6 fake H100; n0 is said to have no GPU;
#   - --json holds every figure, the table a BENCH column, the details the words;
#   - a node whose agent is stopped during the transfers (SIGSTOP) is named within bounded
#     time, never a hang; a pair that cannot reach each other is a finding on both ends;
#   - `ddptop run --bench --nnodes 3:4` leaves n2 out (the event says why, with the figure) and
#     runs on the other three; without spares the launch is refused.
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

# The test double, under the names the agent tries first (libcudart.so.13 ...): LD_LIBRARY_PATH
# is searched before the system's cache, where this machine's real CUDA 13 runtime may be.
mkdir -p "$D/fakecuda"
# (the facts' plain libcudart.so too: a runtime loaded once is the one every later dlopen of its
# soname gets)
for v in 13 12 11; do
    ln -s "$B/fakecudart/libcudart.so.12" "$D/fakecuda/libcudart.so.$v"
    ln -s "$B/fakecudart/libcublas.so.12" "$D/fakecuda/libcublas.so.$v"
done
ln -s "$B/fakecudart/libcudart.so.12" "$D/fakecuda/libcudart.so"
# and the NCCL test double (tests/fakenccl): this machine's real NCCL would fail on the fake GPUs.
# The NCCL part itself is tests/it_check_nccl.sh's: here it is off (--bench-nccl-mib 0), which
# would otherwise add its deadlines to every check (100 s in all)
ln -s "$B/fakenccl/libnccl.so.2" "$D/fakecuda/libnccl.so.2"
# The four nodes are four machines to the bench (their GPUs and memory measured each), not the
# one kernel they share: each sshd runs in ip netns exec's own mount namespace, where a
# file of its own is bind-mounted over the kernel's boot id (a TEST DOUBLE of a machine's
# identity; the mount goes with that namespace).
for i in 0 1 2 3; do
    cat /proc/sys/kernel/random/uuid >"$D/boot$i"
    printf '#!/bin/sh\nmount --bind %s /proc/sys/kernel/random/boot_id && exec /usr/sbin/sshd "$@"\n' \
        "$D/boot$i" >"$D/sshd$i"
    chmod 755 "$D/sshd$i"
done
for i in 0 1 2 3; do
    extra=()
    SSHD_BIN=$D/sshd$i
    [ $i -ne 0 ] && extra+=("SetEnv LD_LIBRARY_PATH=$D/fakecuda$([ $i -eq 3 ] && echo ' DDPTOP_FAKE_CUDART_SLOW=1:0.3')")
    if ! sshd_start "n$i" "${A[i]}" 22 --netns "${NETNS_NODE[i]}" "${extra[@]}"; then
        tap_fail "sshd in namespace $i"; tap_done; exit
    fi
    NODE_SSHD[i]=$SSHD_LAST_PID
    sshd_known_hosts_line "${A[i]}" 22 >>"$D/known_hosts"
done
SSHD_BIN=/usr/sbin/sshd
printf 'root@%s\n' "${A[@]}" >"$D/hosts.txt"
ARGS=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent" --timeout 5
      --bench-nccl-mib 0)

# n2's link at 50 Mbit/s both ways: its own egress and its bridge port's (towards it)
shape() {
    ip netns exec "${NETNS_NODE[2]}" tc qdisc add dev eth0 root tbf rate 50mbit burst 32kbit latency 400ms &&
        ip netns exec "$NETNS_SWITCH" tc qdisc add dev p2 root tbf rate 50mbit burst 32kbit latency 400ms
}
if shape; then tap_ok "n2's link shaped to 50 Mbit/s (tc tbf, both ways)"
else tap_fail "n2's link shaped to 50 Mbit/s (tc tbf)"; fi

# ---- the measured preflight ----
run_check "$D/b.json" "$D/hosts.txt" --json --bench "${ARGS[@]}"
expect_rc "check --bench: the slow node fails the check" 1
jassert "bench: n2 is named slow with its figure and the median; n1 and n3's network pass" "$D/b.json" \
    "st(2, 'bench') == 'fail' and ck(2, 'bench')['slow'] is True" \
    "0.02 <= ck(2, 'bench')['gbps'] <= 0.08" \
    "'Gb/s to and from its peers, median' in ck(2, 'bench')['detail']" \
    "ck(0, 'bench')['slow'] is False and ck(1, 'bench')['slow'] is False and ck(3, 'bench')['slow'] is False" \
    "ck(1, 'bench')['gbps'] > 10 * ck(2, 'bench')['gbps']" \
    "'NIC' in ck(2, 'bench')['hint']"
jassert "bench --json: every node's transfers with figures, the plan and the medians; the NCCL part said off" "$D/b.json" \
    "all(len(ck(k, 'bench')['transfers']) >= 2 for k in range(4))" \
    "all(t['gbps'] > 0 and t['rtt_ms'] >= 0 and t['seconds'] > 0 and t['error'] is None for k in range(4) for t in ck(k, 'bench')['transfers'])" \
    "d['bench']['rounds'] >= 3 and d['bench']['transfers'] >= 8 and d['bench']['median_gbps'] > 0.5" \
    "all(ck(k, 'bench')['cpu_mem_gbs'] > 0 for k in range(4))" \
    "d['bench']['nccl']['skipped'] == 'off (--bench-nccl-mib 0)'" \
    "'NCCL not measured: off (--bench-nccl-mib 0)' in ck(1, 'bench')['detail']"
jassert "bench GPUs: n3's slow GPU named against the fake H100s' median; n0 has none among GPU nodes" "$D/b.json" \
    "len(ck(1, 'bench')['gpus']) == 2 and all(g['tf32_tflops'] > 50 for g in ck(1, 'bench')['gpus'])" \
    "st(3, 'bench') == 'fail' and 'GPU 1: tf32 30.0 TFLOP/s (median 100)' in ck(3, 'bench')['detail'] and '; of 6 ' in ck(3, 'bench')['detail']" \
    "ck(3, 'bench')['gpus'][1]['slow'] and not ck(3, 'bench')['gpus'][0]['slow']" \
    "ck(0, 'bench')['gpus'] == [] and 'no GPU measured here' in ck(0, 'bench')['detail']" \
    "st(0, 'bench') == 'warn'" \
    "all(ck(k, 'bench')['host_measured_on'] is None for k in range(4))"

# The table and the details, as a person reads them.
run_check "$D/b.txt" "$D/hosts.txt" --bench "${ARGS[@]}"
if grep -q 'NCCL   BENCH' "$D/b.txt" && grep -Eq "^${A[2]//./\\.} .*bench +fail +0\.0[2-8][0-9]* Gb/s to and from its peers, median" "$D/b.txt"; then
    tap_ok "the table has a BENCH column, the details name n2 with its figure"
else
    tap_fail "the table has a BENCH column, the details name n2" "$(cat "$D/b.txt")"
fi
sed 's/^/#   /' "$D/b.txt" # the report as a person sees it, in the test's log

# ---- ddptop run --bench with a spare: the slow node is left out, the other three run ----
# (every node with the same fake GPUs at full speed for this one, so that only n2 is odd: n0's
# and n3's sshd started again with them)
for i in 0 3; do
    sshd_stop "${NODE_SSHD[i]}"
    SSHD_BIN=$D/sshd$i
    sshd_start "n$i" "${A[i]}" 22 --netns "${NETNS_NODE[i]}" "SetEnv LD_LIBRARY_PATH=$D/fakecuda" || tap_fail "n$i's sshd again"
done
SSHD_BIN=/usr/sbin/sshd
NO_COLOR=1 CUDA_VISIBLE_DEVICES= timeout -k 5 180 "$DDPTOP" run "$D/hosts.txt" --bench --nnodes 3:4 --headless \
    --nproc-per-node 1 --log-dir "$D/runs" --run-id rb "${ARGS[@]}" -- /bin/sh -c 'echo "ran on node $NODE_RANK of $NNODES, world $WORLD_SIZE"' \
    >"$D/run.out" 2>&1 </dev/null
RC=$?
ev=$D/runs/rb/events.jsonl
if [ "$RC" -eq 0 ] && [ "$(grep -c 'ran on node [0-2] of 3, world 3' "$D/run.out")" -eq 3 ] &&
    grep -q "excluded.*${A[2]//./\\.}.*measured slow (--bench-min-ratio 0.5): 0\.0[2-8][0-9]* Gb/s to and from its peers, median" "$ev"; then
    tap_ok "run --bench --nnodes 3:4: n2 measured slow is excluded (the event says why, with the figure); the other three run"
else
    tap_fail "run --bench --nnodes 3:4 leaves the slow node out and runs on three" "rc $RC" "$(tail -20 "$D/run.out")" "$(grep -i 'exclu\|slow' "$ev" 2>/dev/null | head -5)"
fi
# without a spare to take its place the launch is refused, saying why
NO_COLOR=1 CUDA_VISIBLE_DEVICES= timeout -k 5 180 "$DDPTOP" run "$D/hosts.txt" --bench --headless \
    --nproc-per-node 1 --log-dir "$D/runs" --run-id rb2 "${ARGS[@]}" -- /bin/sh -c 'echo "ran on node $NODE_RANK"' \
    >"$D/run2.out" 2>&1 </dev/null
RC=$?
if [ "$RC" -ne 0 ] && ! grep -q 'ran on node' "$D/run2.out" && grep -q 'launch refused (ssh, env or tcp failed, or a node measured slow; --nnodes MIN:MAX' "$D/run2.out"; then
    tap_ok "run --bench without spares: the launch is refused, naming the measured slow node's check"
else
    tap_fail "run --bench without spares refuses" "rc $RC" "$(tail -20 "$D/run2.out")"
fi

# ---- a node stopped during the transfers: bounded, named ----
tc_clear() { ip netns exec "${NETNS_NODE[2]}" tc qdisc del dev eth0 root 2>/dev/null; ip netns exec "$NETNS_SWITCH" tc qdisc del dev p2 root 2>/dev/null; }
tc_clear
t0=$(date +%s)
NO_COLOR=1 timeout -k 5 120 "$DDPTOP" check "$D/hosts.txt" --json --bench -v "${ARGS[@]}" >"$D/stop.json" 2>"$D/stop.err" </dev/null &
RUN_PID=$!
stopped_it=""
for _ in $(seq 1 300); do
    if grep -q 'bench: transfers, round 1' "$D/stop.err" 2>/dev/null; then
        # n1's agent: the ddptop-agent process in its namespace
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
if [ -n "$stopped_it" ] && [ "$RC" -eq 1 ] && [ "$secs" -lt 90 ]; then
    tap_ok "an agent stopped during the transfers: the check ends in ${secs} s (exit $RC)"
else
    tap_fail "an agent stopped during the transfers: the check ends in bounded time" "stopped: ${stopped_it:-no}, rc $RC, ${secs} s" "$(tail -5 "$D/stop.err")"
fi
jassert "the stopped node fails its bench, its peers say what their transfers met" "$D/stop.json" \
    "st(1, 'bench') == 'fail' or st(1, 'ssh') == 'fail'" \
    "any(t['error'] for k in (0, 2, 3) for t in ck(k, 'bench')['transfers']) or 'n1' in txt(1, 'bench') or st(1, 'bench') == 'fail'" \
    "st(0, 'bench') != 'fail' or 'GPU' in ck(0, 'bench')['detail'] or 'transfer' in ck(0, 'bench')['detail']"
STOPPED=""

# ---- two nodes that cannot reach each other: the pair is a finding on both ends ----
if netns_unreachable 0 "${A[3]}"; then
    run_check "$D/route.json" "$D/hosts.txt" --json --bench "${ARGS[@]}"
    jassert "n0 cannot reach n3: its transfers to n3 failed, said on both ends; the rest measured" "$D/route.json" \
        "any(t['to'] == '${A[3]}' and t['error'] for t in ck(0, 'bench')['transfers']) or not any(t['to'] == '${A[3]}' for t in ck(0, 'bench')['transfers'])" \
        "st(1, 'bench') in ('pass', 'warn') and ck(1, 'bench')['gbps'] > 0.5"
    netns_reachable 0 "${A[3]}"
else
    tap_fail "an unreachable route from n0 to n3"
fi

tap_done
