#!/usr/bin/env bash
# Integration: the control plane under Slurm (docs/run.md "When the controller loses a node",
# docs/slurm.md), on a real Slurm cluster of two nodes (tests/lib/slurm.sh; agents through one
# srun step, no sshd). Each rank prints a numbered line every 20 ms until told to finish and
# writes the same lines to a copy of its own.
#   1. Inside salloc, ddptop SIGSTOPped for 60 s, then continued: no rank killed, the job ends
#      with exit 0 and every rank's log equals its copy.
#   2. From the login node, an allocation made with salloc --no-shell and joined with --jobid:
#      ddptop SIGKILLed; its agents' step goes on; `ddptop attach RUN --headless` takes the run
#      over through a second step of bridges (srun --overlap --attach), and the job ends with
#      exit 0 and complete logs.
#   3. ddptop run --salloc --detach: when the job ends, every agent is gone and the allocation
#      given back within 5 s, though nobody attached; the run's record (adopt.json) names the
#      allocation with --jobid, without --salloc or --detach.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
. tests/lib/ctrank.sh     # the rank whose log must equal its own copy
. tests/lib/slurm.sh
COPIES_BEFORE=$(ls /tmp/ddptop-agent.* 2>/dev/null)
remove_new_copies() {
    local f
    for f in /tmp/ddptop-agent.*; do
        [ -e "$f" ] && ! grep -qxF "$f" <<<"$COPIES_BEFORE" && rm -f "$f"
    done
}
STOPPED=""
cleanup() {
    [ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null
    slurm_down
    remove_new_copies
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

DDP=$PWD/${BUILD:-build}/ddptop
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=
slurm_up_or_end 2
D=$SLURM_DIR
cd "$D"
LOGS=$D/logs

ctrank_install "$D/ctrank"

ranks_on() {
    local p
    for p in $(ip netns pids "$(slurm_netns "$1")" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ctrank ] && echo "$p"
    done
}
agents_on() {
    local p
    for p in $(ip netns pids "$(slurm_netns "$1")" 2>/dev/null); do
        case "$(cat "/proc/$p/comm" 2>/dev/null)" in ddptop-agent*) echo "$p" ;; esac
    done
}
n_ranks() { echo $(($(ranks_on n1 | wc -l) + $(ranks_on n2 | wc -l))); }
no_ranks() { [ "$(n_ranks)" = 0 ]; }
no_agents() { [ -z "$(agents_on n1)$(agents_on n2)" ]; }
printing() { [ "$(grep -c "line 3 " "$1" 2>/dev/null)" -ge 4 ]; }
ddptop_pid() {
    local p
    for p in $(ip netns pids "$(slurm_netns ctl)"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddptop ] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- "--run-id $1" &&
            echo "$p"
    done | head -1
}
wait_pid() {
    local t0=$SECONDS
    while kill -0 "$1" 2>/dev/null; do
        [ $((SECONDS - t0)) -ge "$2" ] && { kill -9 "$1"; return 124; }
        sleep 0.1
    done
    wait "$1"
}

# ---------------------------------------------------------------------------------------------
# 1. ddptop stopped for 60 s inside salloc.
mkdir -p ct1
slurm_login_bg env CTDIR="$D/ct1" salloc -N2 --ntasks-per-node=2 "$DDP" run --slurm --headless --no-check \
    --log-dir "$LOGS" --run-id stop -- "$D/ctrank" >stop.out 2>&1
JOB_PID=$SLURM_LOGIN_PID
if wait_until 40 printing stop.out && dp=$(ddptop_pid stop) && [ -n "$dp" ]; then
    kill -STOP "$dp"
    STOPPED=$dp
    sleep 55
    n=$(n_ranks)
    sleep 5
    kill -CONT "$dp"
    STOPPED=""
    tap_check "ddptop stopped for 60 s inside salloc: the 4 ranks still ran after 55 s ($n)" test "$n" = 4
    sleep 3
    touch ct1/finish
    wait_pid "$JOB_PID" 60; rc=$?
    tap_check "... continued, the job ends with exit 0 ($rc)" test "$rc" = 0 || tail -8 stop.out | sed 's/^/#   /'
    if diag=$(ctrank_logs_match "$LOGS/stop" ct1 4); then tap_ok "every rank's log is its copy (lines: $diag)"
    else tap_fail "every rank's log equals what it printed" "$diag"; fi
    ev_assert "events: the controller's stall named; no node lost" "$LOGS/stop/events.jsonl" \
        "any('the controller did not run for' in e['text'] for e in E)" "not ev('node_lost')"
else
    tap_fail "stop: the job started" "$(tail -5 stop.out)"
fi
wait_until 10 no_ranks || tap_fail "no rank left after the stopped job" "n1: $(ranks_on n1) n2: $(ranks_on n2)"

# ---------------------------------------------------------------------------------------------
# 2. SIGKILL of ddptop outside the allocation (--jobid), then ddptop attach --headless.
mkdir -p ct2
slurm_login salloc --no-shell -N2 --ntasks-per-node=2 >alloc.out 2>&1
jid=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' alloc.out)
if [ -n "$jid" ]; then
    slurm_login_bg env CTDIR="$D/ct2" "$DDP" run --jobid "$jid" --headless --no-check --agent-grace 120 \
        --log-dir "$LOGS" --run-id adopt -- "$D/ctrank" >adopt.out 2>&1
    JOB_PID=$SLURM_LOGIN_PID
    if wait_until 40 printing adopt.out && dp=$(ddptop_pid adopt) && [ -n "$dp" ]; then
        kill -KILL "$dp"
        wait "$JOB_PID" 2>/dev/null
        sleep 3
        tap_check "ddptop SIGKILLed: its 4 ranks go on in the agents' step ($(n_ranks))" test "$(n_ranks)" = 4
        slurm_login_bg "$DDP" attach adopt --headless --log-dir "$LOGS" >attach.out 2>&1
        AT_PID=$SLURM_LOGIN_PID
        caught() { [ "$(grep -c 'caught up' attach.out)" = 2 ]; }
        if wait_until 60 caught; then
            tap_ok "ddptop attach --headless: both nodes reconnected through a step of bridges and caught up"
        else
            tap_fail "ddptop attach takes the run over under Slurm" "$(grep -v '^\[r' attach.out | tail -12)"
        fi
        sleep 2
        touch ct2/finish
        wait_pid "$AT_PID" 60; rc=$?
        tap_check "the run taken over ends with exit 0 ($rc)" test "$rc" = 0 ||
            grep -v '^\[r' attach.out | tail -8 | sed 's/^/#   /'
        if diag=$(ctrank_logs_match "$LOGS/adopt" ct2 4); then tap_ok "every rank's log across the takeover is its copy ($diag)"
        else tap_fail "every rank's log complete across the takeover" "$diag"; fi
        wait_until 10 no_agents && tap_ok "no agent or bridge left on n1 or n2" ||
            tap_fail "no agent left after the run taken over" "n1: $(agents_on n1) n2: $(agents_on n2)"
    else
        tap_fail "adopt: the job started" "$(tail -5 adopt.out)"
    fi
    slurm_login scancel "$jid"
else
    tap_fail "salloc --no-shell granted an allocation" "$(cat alloc.out)"
fi
wait_until 10 no_ranks || tap_fail "no rank left after the run taken over" "n1: $(ranks_on n1) n2: $(ranks_on n2)"

# ---------------------------------------------------------------------------------------------
# 3. --salloc --detach: the job ends, the agents and the allocation go at once.
mkdir -p ct3 xdg && chmod 700 xdg
touch ct3/finish
for _ in $(seq 1 50); do [ -z "$(slurm_login squeue -h)" ] && break; sleep 0.1; done
slurm_login env XDG_RUNTIME_DIR="$D/xdg" CTDIR="$D/ct3" TERM=screen-256color "$DDP" run --salloc '-N2 --ntasks-per-node=1' \
    --detach --no-check --log-dir "$LOGS" --run-id det -- "$D/ctrank" >det.out 2>&1 </dev/null
ended() { grep -q '"kind":"end"' "$LOGS/det/events.jsonl" 2>/dev/null; }
if wait_until 60 ended; then
    t_end=$(date +%s%N)
    gone() { no_agents && [ -z "$(slurm_login squeue -h)" ]; }
    if wait_until 5 gone; then
        tap_ok "--salloc --detach: the job ended, agents gone and allocation given back $((($(date +%s%N) - t_end) / 1000000)) ms later"
    else
        tap_fail "--salloc --detach: agents and allocation gone within 5 s" "agents: $(agents_on n1) $(agents_on n2)" \
            "$(slurm_login squeue -h)"
    fi
else
    tap_fail "--salloc --detach: the job ends" "$(cat det.out)" "$(tail -5 "$LOGS/det/events.jsonl" 2>&1)"
fi
# what ddptop attach would run again: the allocation by its id (not a new one), no --detach
if rec=$(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
a = r["argv"]
ok = ("--salloc" not in a and "--detach" not in a and a[a.index("--jobid") + 1] == r["slurm_jobid"]
      and a[a.index("--run-id") + 1] == "det" and a[a.index("--"):] == ["--", sys.argv[2]])
print(" ".join(a))
sys.exit(0 if ok else 1)' "$LOGS/det/adopt.json" "$D/ctrank" 2>&1); then
    tap_ok "the run's record says --jobid of its allocation, no --salloc or --detach: $rec"
else
    tap_fail "the run's record of a --salloc run" "$rec"
fi
for p in $(ip netns pids "$(slurm_netns ctl)"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--run-id det" && kill -9 "$p"
done

tap_done
