#!/usr/bin/env bash
# Integration: the agents' direct connections to ddptop under srun (wire/direct.h, docs/slurm.md
# "The direct connection") on a real Slurm cluster of three nodes (tests/lib/slurm.sh), each
# node a network namespace, the login node the controller's:
#   - n1's agent connects back and proves the step's key: its lines skip srun's I/O;
#   - n2's agent is told (by the node's TaskProlog) that srun's host is 192.0.2.1, an on-link
#     address nobody answers: its connect times out (the way a firewall that drops looks) and it
#     speaks through srun's I/O, saying why;
#   - n3's agent holds a wrong key (TaskProlog): it refuses the listener's proof, ddptop refuses
#     the connection, and n3 speaks through srun's I/O;
#   - the job runs the same on all three (preflight, launch, every rank's lines, exit 0), the
#     ranks never see the key, not even in /proc/AGENT/environ or their keeper's (issue 28: the
#     block the kernel wrote at exec kept it after unsetenv), and ddptop's listener is gone once
#     every agent said where it is;
#   - DDPTOP_SRUN_DIRECT=0 turns the connections off.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
. tests/lib/slurm.sh
JOB_PID=""
cleanup() {
    [ -n "$JOB_PID" ] && kill -9 "$JOB_PID" 2>/dev/null
    slurm_down
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

DDP=$PWD/${BUILD:-build}/ddptop
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=
slurm_node_env n2 SLURM_SRUN_COMM_HOST=192.0.2.1
slurm_node_env n3 DDPTOP_SRUN_KEY=0000000000000000000000000000000000000000000000000000000000000000
slurm_up_or_end 3
D=$SLURM_DIR
cd "$D"
LOGS=$D/logs
# 192.0.2.1 (TEST-NET-1) on n2's link: its SYN goes out and nobody answers
ip -n "$(slurm_netns n2)" route add 192.0.2.1/32 dev eth0 2>/dev/null

cat >rank.sh <<'EOF2'
#!/bin/sh
# the key as its agent and keeper were given it, if it is still in their environ
k=$PPID; a=$(cut -d' ' -f4 /proc/$k/stat)
seen=$(cat /proc/$a/environ /proc/$k/environ 2>/dev/null | tr '\0' '\n' | grep -c '^DDPTOP_SRUN_KEY=[0-9a-f]\{64\}')
echo "rank $RANK up on $(hostname) key=[${DDPTOP_SRUN_KEY:-}] port=[${DDPTOP_SRUN_PORT:-}] in_agent=[$seen]"
sleep "${HOLD:-0}"
EOF2
chmod 755 rank.sh

# --- 1. a run with the preflight: three nodes, three ways ---
export HOLD=3
slurm_login_bg salloc -N3 --ntasks-per-node=1 "$DDP" run --slurm --headless --log-dir "$LOGS" --run-id mixed \
    -- "$D/rank.sh" >mixed.out 2>&1
JOB_PID=$SLURM_LOGIN_PID
up() { [ "$(grep -c ' up on ' mixed.out 2>/dev/null)" = 3 ]; }
if wait_until 60 up; then
    ctl=$(slurm_netns ctl)
    # ddptop's own listening sockets in the login node's namespace, while the ranks run (not
    # salloc's, which ddptop inherits as its child)
    pid=$(pgrep -f -- "--run-id mixed" | while read -r p; do [ "$(readlink /proc/$p/exe)" = "$DDP" ] && echo "$p"; done | head -1)
    listening=$(ip netns exec "$ctl" ss -ltnpH 2>/dev/null | grep "pid=$pid," | grep -v '"salloc"' || true)
    if [ -n "$pid" ] && [ -z "$listening" ]; then
        tap_ok "once every agent said where it is, ddptop (pid $pid) listens on nothing"
    else
        tap_fail "ddptop's listener closes once every agent greeted" "pid '$pid'" "$listening"
    fi
else
    tap_fail "the ranks of the mixed run came up" "$(tail -5 mixed.out)"
fi
wait "$JOB_PID"
rc=$?
JOB_PID=""
AL=$LOGS/mixed/agent.log
ok=1
for r in 0 1 2; do grep -q "rank $r up on n$((r + 1)) key=\[\] port=\[\] in_agent=\[0\]" "$LOGS/mixed/attempt-0/rank-$r.log" 2>/dev/null || ok=0; done
if [ "$rc" = 0 ] && [ "$ok" = 1 ]; then
    tap_ok "preflight and launch on three nodes: every rank's line, exit 0; no rank sees the key or the port, nor finds the key in its agent's or keeper's /proc/PID/environ"
else
    tap_fail "the mixed run" "rc $rc" "$(tail -5 mixed.out)" "$(cat "$LOGS"/mixed/attempt-0/rank-*.log 2>&1)"
fi
tap_check "n1's agent speaks over its direct connection (agent.log)" \
    grep -q "^ddptop: n1 (task 0) speaks over its direct connection from $(slurm_addr n1):" "$AL"
tap_check "n2's agent: no answer from 192.0.2.1 within a second, so it speaks through srun's I/O, and says why" \
    grep -q "no direct connection to ddptop (connect to 192.0.2.1 port [0-9]*: no answer in 1000 ms): speaking through srun's I/O" "$AL"
tap_check "n3's agent (wrong key) refuses the listener's proof, and ddptop the connection" \
    sh -c "grep -q 'no direct connection to ddptop (the listener there could not prove it is this step.s ddptop)' '$AL' &&
           grep -q '^ddptop: a direct connection from $(slurm_addr n3):[0-9]* was refused' '$AL'"
tap_check "the run says so as an event of each of those nodes (headless output and events.jsonl)" \
    sh -c "grep -q 'node n2: no direct connection to ddptop (connect to 192.0.2.1 port' mixed.out &&
           grep -q 'node n3: no direct connection to ddptop (the listener there could not prove' mixed.out &&
           grep -q 'node n2: no direct connection' '$LOGS/mixed/events.jsonl' &&
           ! grep -q 'node n1: no direct connection' mixed.out"
if ! grep -q "n2 (task 1) speaks over\|n3 (task 2) speaks over" "$AL"; then
    tap_ok "neither n2 nor n3 was taken as directly connected"
else
    tap_fail "neither n2 nor n3 was taken as directly connected" "$(cat "$AL")"
fi

# --- 2. DDPTOP_SRUN_DIRECT=0: nobody connects, all through srun's I/O ---
export HOLD=0
slurm_login salloc -N3 --ntasks-per-node=1 env DDPTOP_SRUN_DIRECT=0 "$DDP" run --slurm --headless --no-check \
    --log-dir "$LOGS" --run-id off -- "$D/rank.sh" >off.out 2>&1
rc=$?
ok=1
for r in 0 1 2; do grep -q "rank $r up on n$((r + 1))" "$LOGS/off/attempt-0/rank-$r.log" 2>/dev/null || ok=0; done
if [ "$rc" = 0 ] && [ "$ok" = 1 ] && grep -q "DDPTOP_SRUN_DIRECT=0" "$LOGS/off/agent.log" &&
   ! grep -q "speaks over its direct connection\|no direct connection" "$LOGS/off/agent.log"; then
    tap_ok "DDPTOP_SRUN_DIRECT=0: no direct connection is offered, the run goes through srun's I/O"
else
    tap_fail "DDPTOP_SRUN_DIRECT=0" "rc $rc ok $ok" "$(cat "$LOGS/off/agent.log" 2>&1 | tail -5)"
fi
tap_done
