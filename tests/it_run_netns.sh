#!/usr/bin/env bash
# Integration: `ddptop run` on three "nodes", each a network namespace with its own sshd on
# port 22 at a private address, all on one bridge; the controller runs in the root namespace.
# Ranks of ddptop-train rendezvous on node 0's address and train to done through the bridge.
# Then a node's link is dropped mid-run (eth0 down inside that namespace, so its agent hears
# nothing and the controller hears nothing from it). With --agent-grace 0 (torchrun's way) the
# agent's watchdog kills that node's ranks, the controller reports the node lost (node_lost
# naming the host) and fails the job, stopping the ranks of the other nodes. With the default
# grace the link stays down for 90 s: the node is silent, then unreachable, its ranks go on
# printing, its agent spools their output; when the link is back the controller reconnects
# through a bridge and every line each rank printed is in its log, once, in order (compared
# with the copy each rank wrote itself).
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/netns.sh
. tests/lib/run_job.sh
. tests/lib/ctrank.sh     # the rank whose log must equal its own copy
ulimit -c 0

D=""
cleanup() {
    rj_cleanup
    if [ -n "$D" ]; then kill_marker_pids "$D/bin"; kill_marker_pids "$D/agent"; fi
    sshd_cleanup
    netns_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3

for b in "$DDPTOP" "$TRAIN"; do
    [ -x "$b" ] || { tap_fail "binary exists: $b (make all)"; tap_done; exit 1; }
done
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
if ! netns_setup 3; then tap_fail "three namespaces on a bridge"; tap_done; exit; fi
A=("${NETNS_ADDR[@]}")
for i in 0 1 2; do
    if ! sshd_start "n$i" "${A[i]}" 22 --netns "${NETNS_NODE[i]}"; then
        tap_fail "sshd in namespace $i"; tap_done; exit
    fi
    sshd_known_hosts_line "${A[i]}" 22 >>"$D/known_hosts"
    echo "root@${A[i]} slots=2" >>"$D/hosts.txt"
done
mkdir -p "$D/bin"
cp "$TRAIN" "$D/bin/ddptop-train"
RID=netns$$-$RANDOM
COMMON=(--headless --known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config"
        --agent-dir "$D/agent" --timeout 10 --log-dir "$D/logs" --master-port 29500)
SMALL=(--hidden 64 --batch-size 16 --log-every 1)

# ranks_in NODE: pids of ddptop-train processes inside node NODE's namespace.
ranks_in() {
    local p
    for p in $(ip netns pids "${NETNS_NODE[$1]}" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddptop-train ] && echo "$p"
    done
}
no_ranks_in() { [ -z "$(ranks_in "$1")" ]; }

# ---------------------------------------------------------------------------------------
# 1. Six ranks on three namespaced nodes train to done (with the preflight).
rj_run "$D/train.out" "$D/hosts.txt" "${COMMON[@]}" --run-id "$RID-train" \
    -- "$D/bin/ddptop-train" --steps 40 "${SMALL[@]}"
rj_expect_rc "3 namespaced nodes x 2 ranks of ddptop-train: done" 0
if diag=$($PY - "$D/logs/$RID-train" "${A[0]}" <<'PY'
import json, sys
run_dir, master = sys.argv[1:3]
bad, sums = [], set()
for r in range(6):
    evs = [json.loads(l) for l in open(f"{run_dir}/attempt-0/rank-{r}.log") if l.startswith("{")]
    steps = [e["step"] for e in evs if e["event"] == "step"]
    done = [e for e in evs if e["event"] == "done"]
    if steps != list(range(1, 41)): bad.append(f"rank {r}: steps {steps[:3]}..{steps[-3:]}")
    if len(done) != 1: bad.append(f"rank {r}: done lines {done}")
    else: sums.add(done[0]["param_checksum"])
if len(sums) != 1: bad.append(f"checksums {sums}")
for b in bad: print("# " + b)
if not bad: print(sums.pop())
sys.exit(1 if bad else 0)
PY
); then
    tap_ok "every rank stepped 1..40 and printed done; equal param_checksum $diag"
else
    tap_fail "every rank trained to done with equal checksums" "$diag" "$(tail -15 "$D/train.out")"
fi
ev_assert "events: hosts are the namespaced nodes in hostfile order" "$D/logs/$RID-train/events.jsonl" \
    "sorted((e['rank'], e['host']) for e in ev('exit')) == [(r, h) for r, h in enumerate(['${A[0]}', '${A[0]}', '${A[1]}', '${A[1]}', '${A[2]}', '${A[2]}'])] or sorted((e['rank'], e['host']) for e in ev('exit')) == [(r, 'root@' + h) for r, h in enumerate(['${A[0]}', '${A[0]}', '${A[1]}', '${A[1]}', '${A[2]}', '${A[2]}'])]"

# ---------------------------------------------------------------------------------------
# 2. Node 2's link goes down mid-run.
rj_start "$D/drop.out" "$D/hosts.txt" "${COMMON[@]}" --no-check --run-id "$RID-drop" --term-timeout 3 --agent-grace 0 --node-timeout 10 \
    -- "$D/bin/ddptop-train" --steps 1000000 "${SMALL[@]}"
all_stepping() {
    local r
    for r in 0 1 2 3 4 5; do grep -q "^\[r$r [^]]*\] {\"event\":\"step\"" "$D/drop.out" || return 1; done
}
if ! wait_until 60 all_stepping; then
    tap_fail "six ranks stepping before the link drop" "$(tail -10 "$D/drop.out")" "$(cat "$D/drop.out.err")"
    tap_done; exit
fi
n2=$(ranks_in 2 | wc -l)
ip -n "${NETNS_NODE[2]}" link set eth0 down
T_DOWN=$(date +%s%N)
ms_since_down() { echo $((($(date +%s%N) - T_DOWN) / 1000000)); }
if wait_until 9 no_ranks_in 2; then
    tap_ok "node 2's link down: its $n2 ranks killed by the agent's watchdog after $(ms_since_down) ms"
else
    tap_fail "node 2's link down: its ranks still alive after 9 s" "$(ps -o pid,stat,args -p "$(ranks_in 2 | paste -sd,)" 2>&1)"
fi
lost_seen() { grep -q '"kind":"node_lost"' "$D/logs/$RID-drop/events.jsonl" 2>/dev/null; }
if wait_until 16 lost_seen; then
    t_lost=$(ms_since_down)
    ev_assert "node_lost event names node 2 (${A[2]}) after ${t_lost} ms (heartbeats stop for 10 s)" \
        "$D/logs/$RID-drop/events.jsonl" \
        "any('${A[2]}' in (e['host'] or '') for e in ev('node_lost'))" \
        "not any('${A[0]}' in (e['host'] or '') or '${A[1]}' in (e['host'] or '') for e in ev('node_lost'))"
else
    tap_fail "node_lost event within 16 s of the link drop" "$(cat "$D/logs/$RID-drop/events.jsonl" 2>&1)"
fi
rj_wait 30
rj_expect_rc "a lost node fails the job" 1
if grep -qi 'root cause' "$D/drop.out" && grep -i 'root cause' "$D/drop.out" | grep -q "${A[2]}"; then
    tap_ok "headless root cause names the lost node ${A[2]}"
else
    tap_fail "headless root cause names the lost node ${A[2]}" "$(grep -v event "$D/drop.out" | tail -15)"
fi
if no_ranks_in 0 && no_ranks_in 1 && no_ranks_in 2; then
    tap_ok "no rank left on any node after the job ended"
else
    tap_fail "no rank left on any node" "node0: $(ranks_in 0 | paste -sd' ') node1: $(ranks_in 1 | paste -sd' ') node2: $(ranks_in 2 | paste -sd' ')"
fi
ip -n "${NETNS_NODE[2]}" link set eth0 up
netns_wait_ping "${A[2]}" || tap_fail "node 2's link back up"

# ---------------------------------------------------------------------------------------
# 3. Node 2's link goes down for 90 s; the run goes on (the default --agent-grace).
# Each rank prints a numbered line every 20 ms until told to finish, and writes the same
# lines to a copy of its own: its log must equal that copy, byte for byte.
ctrank_install "$D/bin/ctrank"
mkdir -p "$D/ct"
ct_ranks_in() {
    local p
    for p in $(ip netns pids "${NETNS_NODE[$1]}" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ctrank ] && echo "$p"
    done
}
rj_start "$D/part.out" "$D/hosts.txt" "${COMMON[@]}" --no-check --run-id "$RID-part" --node-timeout 10 \
    --env "CTDIR=$D/ct" -- "$D/bin/ctrank"
all_printing() {
    local r
    for r in 0 1 2 3 4 5; do grep -q "^\[r$r [^]]*\] rank $r line 3 " "$D/part.out" || return 1; done
}
if ! wait_until 60 all_printing; then
    tap_fail "six ranks printing before the partition" "$(tail -10 "$D/part.out")" "$(cat "$D/part.out.err")"
    tap_done; exit
fi
ev="$D/logs/$RID-part/events.jsonl"
ip -n "${NETNS_NODE[2]}" link set eth0 down
T_DOWN=$(date +%s%N)
unreachable_seen() { grep -q "node ${A[2]} unreachable" "$ev" 2>/dev/null; }
if wait_until 30 unreachable_seen; then
    tap_ok "node 2's link down: node ${A[2]} silent, then unreachable after $(ms_since_down) ms (--node-timeout 10)"
else
    tap_fail "node 2 unreachable within 30 s of its link going down" "$(tail -5 "$ev")"
fi
sleep 30
alive2=$(ct_ranks_in 2 | wc -l)
if [ "$alive2" -eq 2 ] && kill -0 "$RJ_PID" 2>/dev/null && ! grep -q '"kind":"node_lost"' "$ev"; then
    tap_ok "40 s into the partition node 2's two ranks still run, the job too, no node lost"
else
    tap_fail "node 2's ranks go on during the partition (alive: $alive2)" "$(tail -5 "$ev")"
fi
while [ $(( ($(date +%s%N) - T_DOWN) / 1000000000 )) -lt 90 ]; do sleep 1; done
ip -n "${NETNS_NODE[2]}" link set eth0 up
T_UP=$(date +%s%N)
reconnected() { grep -q "node ${A[2]} caught up" "$ev" 2>/dev/null; }
# a link that is back is used within a second or two (a fresh connect each second while the
# node cannot be reached); 10 s leaves room for a loaded machine
if wait_until 10 reconnected; then
    tap_ok "link back after 90 s: node 2 reconnected and caught up $(( ($(date +%s%N) - T_UP) / 1000000 )) ms later"
else
    tap_fail "node 2 reconnected and caught up within 10 s of its link coming back" "$(tail -8 "$ev")"
fi
touch "$D/ct/finish"
rj_wait 60
rj_expect_rc "the partitioned job ends with exit 0" 0
if diag=$(ctrank_logs_match "$D/logs/$RID-part" "$D/ct" 6); then
    tap_ok "every rank's log is its own copy, byte for byte (lines per rank: $diag)"
else
    tap_fail "every rank's log equals what it printed" "$diag"
fi
ev_assert "events: node 2 went silent, unreachable, reconnected; no node lost" "$ev" \
    "any('${A[2]}' in e['text'] and 'silent since' in e['text'] for e in E)" \
    "any('${A[2]}' in e['text'] and 'reconnected after' in e['text'] for e in E)" \
    "not ev('node_lost')"
if no_ranks_in 2 && [ -z "$(ct_ranks_in 0)$(ct_ranks_in 1)$(ct_ranks_in 2)" ]; then
    tap_ok "no rank left on any node after the partitioned job"
else
    tap_fail "no rank left after the partitioned job"
fi

tap_done
