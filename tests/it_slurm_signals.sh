#!/usr/bin/env bash
# Integration: signals, losses and clean-up of ddptop on a real Slurm cluster
# (tests/lib/slurm.sh; no sshd). Each job runs 2 nodes x 2 ranks of a small shell rank that
# reports SIGTERM and SIGUSR1:
#   - a lost node: its agent is SIGKILLed; the root cause names the node, no rank is left;
#   - a preemption warning (scancel --signal=USR1): every rank gets it exactly once, the job
#     goes on, and the events say so;
#   - scancel: no rank on any node within 10 s, the root cause says Slurm stopped the job;
#   - SIGKILL of ddptop: no rank on any node within 10 s;
#   - the dashboard inside salloc on a real terminal (tmux): both nodes' ranks running; q, y
#     stops the job.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
. tests/lib/slurm.sh
SOCK=it_slurm_$$
. tests/lib/tmux.sh
# An agent killed by SIGKILL before every agent started cannot have its srun --bcast copy removed: the
# test removes the copies that appeared while it ran.
COPIES_BEFORE=$(ls /tmp/ddptop-agent.* 2>/dev/null)
remove_new_copies() {
    local f
    for f in /tmp/ddptop-agent.*; do
        [ -e "$f" ] && ! grep -qxF "$f" <<<"$COPIES_BEFORE" && rm -f "$f"
    done
}
# (and the NCCL flight-recorder directories of runs whose agents were killed)
trap 'tmux_cleanup; slurm_down; remove_new_copies; rm -rf /tmp/ddptop-nccl-{lost,preempt,killed,relost,tui,tui2}' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PY=/usr/bin/python3
DDP=$PWD/${BUILD:-build}/ddptop
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=
slurm_up_or_end 2
D=$SLURM_DIR
cd "$D"
LOGS=$D/logs
export CKPT_DIR=$D/ckpt
mkdir -p "$CKPT_DIR"

# The rank: says when it is up and when it gets TERM or USR1 (its marker: it_slurm_rank).
cat >rank.sh <<'EOF'
#!/bin/sh
# it_slurm_rank
trap 'echo "rank $RANK got USR1"' USR1
# a checkpoint that takes a second: the file shows it had the time (the line may not reach
# ddptop when Slurm ends srun with the job)
trap 'echo "rank $RANK got TERM"; sleep 1; echo saved >"$CKPT_DIR/ckpt-$RANK"; exit 0' TERM
echo "rank $RANK up on $(hostname) attempt $TORCHELASTIC_RESTART_COUNT"
[ "$TORCHELASTIC_RESTART_COUNT" = 1 ] && [ -n "${QUICK_SECOND:-}" ] && exit 0
while :; do sleep 0.2; done
EOF
chmod +x rank.sh

# ranks_on NODE: pids of rank processes in NODE's namespace.
ranks_on() {
    local p
    for p in $(ip netns pids "$(slurm_netns "$1")" 2>/dev/null); do
        tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q "rank.sh" && echo "$p"
    done
}
no_ranks() { [ -z "$(ranks_on n1)$(ranks_on n2)" ]; }
# wait_no_ranks SECONDS: 0 once no rank runs on any node; sets GONE_S.
wait_no_ranks() {
    local t0=$SECONDS
    while ! no_ranks; do
        [ $((SECONDS - t0)) -ge "$1" ] && return 1
        sleep 0.1
    done
    GONE_S=$((SECONDS - t0))
}
# start_job RUN-ID: salloc + ddptop run in the background; JOB_PID is ddptop's salloc.
start_job() {
    slurm_login_bg salloc -N2 --ntasks-per-node=2 "$DDP" run --slurm --headless --no-check \
        --log-dir "$LOGS" --run-id "$1" -- "$D/rank.sh" >"$1.out" 2>&1
    JOB_PID=$SLURM_LOGIN_PID
    local t0=$SECONDS
    until [ "$(grep -c ' up on ' "$1.out" 2>/dev/null)" = 4 ]; do
        [ $((SECONDS - t0)) -ge 30 ] && return 1
        sleep 0.1
    done
}
wait_job() {
    local t0=$SECONDS
    while kill -0 "$JOB_PID" 2>/dev/null; do
        [ $((SECONDS - t0)) -ge "$1" ] && { kill -9 "$JOB_PID"; return 124; }
        sleep 0.1
    done
    wait "$JOB_PID"
}

# ---------------------------------------------------------------------------------------------
# 1. A lost node: n2's agent is killed.
if start_job lost; then
    for p in $(ip netns pids "$(slurm_netns n2)"); do
        tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -Eq 'ddptop-agent[^ ]* --relay' && kill -9 "$p"
    done
    wait_job 30; rc=$?
    tap_check "n2's agent killed: ddptop exits 1" test "$rc" = 1
    tap_check "root cause: node n2 lost, its agent's task was killed" \
        grep -q "root cause: node n2 lost: .*the agent's task on n2 ended: Killed" lost.out ||
        grep 'root cause' lost.out | sed 's/^/#   /'
    tap_check "n1's ranks stopped with SIGTERM (their last lines are in the log)" \
        sh -c "grep -q 'rank 0 got TERM' $LOGS/lost/attempt-0/rank-0.log && grep -q 'rank 1 got TERM' $LOGS/lost/attempt-0/rank-1.log"
    wait_no_ranks 10 && tap_ok "no rank left on n1 or n2 ($GONE_S s)" ||
        tap_fail "no rank left after a lost node" "n1: $(ranks_on n1) n2: $(ranks_on n2)"
else
    tap_fail "lost node: the job started" "$(tail -5 lost.out)"
fi

# 1b. The same with --max-restarts 1: attempt 1 runs on a new agents' step for n2 (one node).
slurm_login_bg env QUICK_SECOND=1 salloc -N2 --ntasks-per-node=2 "$DDP" run --slurm --headless --no-check -v \
    --max-restarts 1 --log-dir "$LOGS" --run-id relost -- "$D/rank.sh" >relost.out 2>&1
JOB_PID=$SLURM_LOGIN_PID
t0=$SECONDS
until [ "$(grep -c ' up on ' relost.out 2>/dev/null)" = 4 ] || [ $((SECONDS - t0)) -ge 30 ]; do sleep 0.1; done
for p in $(ip netns pids "$(slurm_netns n2)"); do
    tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -Eq 'ddptop-agent[^ ]* --relay' && kill -9 "$p"
done
wait_job 60; rc=$?
tap_check "n2's agent killed with --max-restarts 1: attempt 1 succeeds (exit $rc)" test "$rc" = 0 ||
    tail -12 relost.out | sed 's/^/#   /'
tap_check "attempt 1 started a new step for n2 alone" \
    sh -c "grep -q 'ddptop: agents: srun .*--nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist=n2 ' relost.out"
tap_check "attempt 1's rank 3 ran on n2" grep -q "rank 3 up on n2 attempt 1" "$LOGS/relost/attempt-1/rank-3.log"
wait_no_ranks 10 || tap_fail "no rank left after the restarted job" "n1: $(ranks_on n1) n2: $(ranks_on n2)"

# ---------------------------------------------------------------------------------------------
# 2. A preemption warning, then scancel.
if start_job preempt; then
    jid=$(slurm_login squeue -h -o %i | head -1)
    slurm_login scancel --signal=USR1 "$jid"
    t0=$SECONDS
    until [ "$(cat "$LOGS"/preempt/attempt-0/rank-*.log 2>/dev/null | grep -c 'got USR1')" -ge 4 ] ||
          [ $((SECONDS - t0)) -ge 10 ]; do sleep 0.1; done
    sleep 1 # a second delivery would show by now
    n=$(cat "$LOGS"/preempt/attempt-0/rank-*.log | grep -c 'got USR1')
    tap_check "scancel --signal=USR1: every rank got SIGUSR1 exactly once (4 lines: $n)" test "$n" = 4
    tap_check "the job goes on after the warning" sh -c "kill -0 $JOB_PID && [ \$(grep -c 'got TERM' preempt.out) = 0 ]"
    grep -q "SIGUSR1 on n1: Slurm signalled" preempt.out && grep -q "SIGUSR1 on n2: Slurm signalled" preempt.out &&
        tap_ok "the warning shows as an event for n1 and n2" ||
        tap_fail "the warning shows as an event per node" "$(grep -i usr1 preempt.out)"

    rm -f "$CKPT_DIR"/ckpt-*
    slurm_login scancel "$jid"
    wait_no_ranks 10 && tap_ok "scancel: no rank on n1 or n2 within 10 s ($GONE_S s)" ||
        tap_fail "scancel: no rank left within 10 s" "n1: $(ranks_on n1) n2: $(ranks_on n2)"
    wait_job 30; rc=$?
    tap_check "scancel: ddptop ends (exit 1)" test "$rc" = 1
    tap_check "scancel: every rank had its SIGTERM and a second to save before KillWait (4 files)" \
        test "$(ls "$CKPT_DIR" | grep -c ckpt-)" = 4
    tap_check "scancel: the root cause says Slurm stopped the agents with SIGTERM" \
        grep -q "root cause: Slurm stopped the job on n[12] with SIGTERM (scancel, the job.s time limit or a preemption)" preempt.out ||
        grep 'root cause' preempt.out | sed 's/^/#   /'
    ev_assert "events: a SIGUSR1 and a SIGTERM event per node; every rank's exit after scancel" \
        "$LOGS/preempt/events.jsonl" \
        "sorted(e['host'] for e in ev('signal') if 'SIGUSR1' in e['text']) == ['n1', 'n2']" \
        "sorted(e['host'] for e in ev('signal') if 'SIGTERM' in e['text']) == ['n1', 'n2']" \
        "sorted(e['rank'] for e in ev('exit')) == [0, 1, 2, 3]"
    ev_assert "events: the root cause's class is preempted (docs/failures.md)" "$LOGS/preempt/events.jsonl" \
        "cause['class'] == 'preempted'" "'resume from the last snapshot' in cause['fix']"
else
    tap_fail "preemption: the job started" "$(tail -5 preempt.out)"
fi

# ---------------------------------------------------------------------------------------------
# 3. SIGKILL of ddptop: the agents see their input end and take the ranks with them.
if start_job killed; then
    dp=""
    for p in $(ip netns pids "$(slurm_netns ctl)"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddptop ] && dp=$p
    done
    kill -9 $dp
    wait_no_ranks 10 && tap_ok "SIGKILL of ddptop (pid $dp): no rank on n1 or n2 within 10 s ($GONE_S s)" ||
        tap_fail "SIGKILL of ddptop: no rank left within 10 s" "n1: $(ranks_on n1) n2: $(ranks_on n2)"
    wait_job 30
    for _ in $(seq 1 50); do [ -z "$(slurm_login squeue -h)" ] && break; sleep 0.1; done
    tap_check "the allocation ended with its command" test -z "$(slurm_login squeue -h)"
else
    tap_fail "SIGKILL: the job started" "$(tail -5 killed.out)"
fi

# ---------------------------------------------------------------------------------------------
# 4. The dashboard inside salloc on a real terminal.
# the terminal's shell runs salloc on the login node (ctl's namespaces, as slurm_login does)
cat >tui.sh <<EOF
cd $D
nsenter -t $(cat "$D/run/ctl.holder.pid") -m -n -u --wd=$D env SLURM_CONF=$SLURM_CONF_FILE \\
    salloc -N2 --ntasks-per-node=2 $DDP run --slurm --log-dir $LOGS --run-id tui -- $D/rank.sh
echo SALLOC-EXIT=\$?
sleep 30
EOF
T new-session -d -x 120 -y 40 -s S "bash $D/tui.sh"
if wait_screen S 'RUNNING' 40 && wait_screen S '4 running' 20; then
    tap_ok "dashboard inside salloc: RUNNING, 4 ranks running"
else
    tap_fail "dashboard inside salloc: RUNNING" "$SCREEN"
fi
grep -Eq '^ +[0-1] +n1 ' <<<"$SCREEN" && grep -Eq '^ +[2-3] +n2 ' <<<"$SCREEN" &&
    tap_ok "rank rows: ranks 0-1 on n1, 2-3 on n2" || tap_fail "rank rows on n1 and n2" "$SCREEN"
T send-keys -t S q
wait_screen S 'y/n' 10
T send-keys -t S y
if wait_screen S 'SALLOC-EXIT=' 40; then
    tap_ok "q, y: the job stops and salloc ends"
else
    tap_fail "q, y stops the job" "$SCREEN"
fi
wait_no_ranks 10 && tap_ok "after the dashboard's stop: no rank on n1 or n2" ||
    tap_fail "after the dashboard's stop: no rank left" "n1: $(ranks_on n1) n2: $(ranks_on n2)"

# ---------------------------------------------------------------------------------------------
# 5. --salloc from the login node on a terminal: the dashboard's session takes the allocation
#    made before it (one job, not two) and gives it back when the job ends.
cat >tui2.sh <<EOF
cd $D
nsenter -t $(cat "$D/run/ctl.holder.pid") -m -n -u --wd=$D env SLURM_CONF=$SLURM_CONF_FILE \\
    $DDP run --salloc '-N2 --ntasks-per-node=1' --log-dir $LOGS --run-id tui2 -- $D/rank.sh
echo DDPTOP-EXIT=\$?
sleep 30
EOF
T new-session -d -x 120 -y 40 -s S2 "bash $D/tui2.sh"
if wait_screen S2 '2 running' 40; then
    tap_ok "--salloc on a terminal: the dashboard shows 2 ranks running"
else
    tap_fail "--salloc on a terminal: 2 ranks running" "$SCREEN"
fi
n=$(slurm_login squeue -h -o %i | wc -l)
tap_check "--salloc on a terminal: one allocation, not one per process ($n)" test "$n" = 1
T send-keys -t S2 q
wait_screen S2 'y/n' 10
T send-keys -t S2 y
wait_screen S2 'DDPTOP-EXIT=' 40
for _ in $(seq 1 50); do [ -z "$(slurm_login squeue -h)" ] && break; sleep 0.1; done
tap_check "--salloc on a terminal: the allocation is given back when the job ends" test -z "$(slurm_login squeue -h)"
wait_no_ranks 10 || tap_fail "no rank left after --salloc's job" "n1: $(ranks_on n1) n2: $(ranks_on n2)"

tap_done
