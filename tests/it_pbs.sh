#!/usr/bin/env bash
# Integration: --pbs with PBS's task manager. No PBS server exists for Debian 12, so
# tests/pbs/pbs_tmrsh (a TEST DOUBLE, named as such) stands in for pbs_tmrsh: it records its
# arguments and starts the agent on this machine. The nodes of PBS_NODEFILE are localhost and
# 127.0.0.1 (two names of this machine), two slots each. Shown: ddptop finds pbs_tmrsh on
# PATH and says so, starts one agent per node with `pbs_tmrsh NODE AGENT`, gives the ranks
# torchrun's variables with MASTER_ADDR the first node; `ddptop check --pbs` shows a TM
# column; a node where pbs_tmrsh cannot start the agent is named with what to do; without
# pbs_tmrsh on PATH it falls back to SSH and says so. A run whose controller was SIGKILLed is
# taken over with `ddptop attach RUN --headless`: bridges started through pbs_tmrsh
# (`pbs_tmrsh NODE AGENT --attach`) reconnect to the agents, and the logs are complete.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
D=$(mktemp -d /tmp/it_pbs.XXXXXX)
trap 'kill_marker_pids "$D/"; rm -rf "$D"' EXIT
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=
AGENT=$PWD/${BUILD:-build}/ddptop-agent
printf 'localhost\nlocalhost\n127.0.0.1\n127.0.0.1\n' >"$D/nodefile"
export PBS_NODEFILE=$D/nodefile PBS_TMRSH_LOG=$D/tmrsh.log
STAND_IN_PATH=$PWD/tests/pbs:$PATH

# 1. A job through pbs_tmrsh.
PATH=$STAND_IN_PATH rj_run "$D/run.out" --pbs --headless --no-check --log-dir "$D/logs" --run-id pbs \
    -- sh -c 'echo "rank $RANK of $WORLD_SIZE local $LOCAL_RANK master $MASTER_ADDR"'
rj_expect_rc "--pbs with pbs_tmrsh on PATH: 4 ranks succeed" 0
tap_check "pbs_tmrsh started one agent per node: 'localhost AGENT' and '127.0.0.1 AGENT'" \
    test "$(sort "$D/tmrsh.log")" = "$(printf '127.0.0.1 %s\nlocalhost %s' "$AGENT" "$AGENT")"
tap_check "ddptop says the agents started with pbs_tmrsh" \
    grep -q 'PBS job: agents started with pbs_tmrsh' "$D/run.out"
tap_check "rank 3: world 4, local rank 1, MASTER_ADDR the first node of PBS_NODEFILE" \
    grep -q 'rank 3 of 4 local 1 master localhost' "$D/logs/pbs/attempt-0/rank-3.log"

# 2. ddptop check --pbs: the link column is TM.
PATH=$STAND_IN_PATH "$DDPTOP" check --pbs >"$D/check.out" 2>&1
rc=$?
tap_check "check --pbs: a TM column, both nodes pass it (exit $rc)" \
    sh -c "grep -Eq '^HOST +ADDRESS +TM ' $D/check.out && grep -Eq '^localhost +localhost +pass' $D/check.out && grep -Eq '^127.0.0.1 +127.0.0.1 +pass' $D/check.out" ||
    sed 's/^/#   /' "$D/check.out"

# 3. pbs_tmrsh cannot start the agent on one node.
PATH=$STAND_IN_PATH PBS_TMRSH_FAIL_HOST=127.0.0.1 rj_run "$D/fail.out" --pbs --headless --no-check \
    --log-dir "$D/logs" --run-id pbsfail -- true
rj_expect_rc "pbs_tmrsh fails on 127.0.0.1: the job fails" 1
tap_check "the node is named: pbs_tmrsh could not start the agent (127), and where to look" \
    grep -q 'node 127.0.0.1 .*pbs_tmrsh could not start the agent (exit status 127): see .*agent.log' "$D/fail.out" ||
    sed 's/^/#   /' "$D/fail.out" "$D/fail.out.err"
tap_check "what pbs_tmrsh said is kept in the run's agent.log" \
    grep -q 'pbs_tmrsh: 127.0.0.1: .*No such file or directory' "$D/logs/pbsfail/agent.log"

# 4. No pbs_tmrsh on PATH: SSH, and it says so (the node does not resolve: fails fast).
printf 'ddptop-pbs-nowhere.invalid\n' >"$D/nodefile2"
PATH=/usr/bin:/bin PBS_NODEFILE=$D/nodefile2 rj_run "$D/ssh.out" --pbs --headless --no-check \
    --timeout 3 --log-dir "$D/logs" --run-id pbsssh -- true
tap_check "without pbs_tmrsh: 'no pbs_tmrsh on PATH, agents started over SSH'" \
    grep -q 'PBS job: no pbs_tmrsh on PATH, agents started over SSH' "$D/ssh.out"
tap_check "without pbs_tmrsh the link is SSH (pbs_tmrsh was not called)" \
    test "$(wc -l <"$D/tmrsh.log")" = 6

# 5. The controller SIGKILLed; ddptop attach takes the run over through pbs_tmrsh.
cat >"$D/count.sh" <<'EOF'
#!/bin/sh
i=0
while [ $i -lt 300 ]; do echo "rank $RANK line $i"; i=$((i + 1)); sleep 0.01; done
EOF
chmod +x "$D/count.sh"
PATH=$STAND_IN_PATH rj_start "$D/adopt.out" --pbs --headless --no-check --log-dir "$D/logs" --run-id pbsadopt \
    -- "$D/count.sh"
printing() { [ "$(grep -c 'line 5$' "$D/adopt.out")" -ge 4 ]; }
if wait_until 30 printing; then
    kill -KILL "$RJ_PID"
    wait "$RJ_PID" 2>/dev/null
    RJ_PID=""
    : >"$D/tmrsh.log"
    PATH=$STAND_IN_PATH timeout 60 "$DDPTOP" attach pbsadopt --headless --log-dir "$D/logs" \
        >"$D/attach.out" 2>&1 </dev/null
    rc=$?
    tap_check "ddptop attach --headless took the PBS run over: exit 0 ($rc)" test "$rc" = 0 ||
        grep -v '^\[r' "$D/attach.out" | tail -8 | sed 's/^/#   /'
    tap_check "the bridges started through pbs_tmrsh: 'NODE AGENT --attach' for both nodes" \
        test "$(sort "$D/tmrsh.log")" = "$(printf '127.0.0.1 %s --attach\nlocalhost %s --attach' "$AGENT" "$AGENT")"
    bad=""
    for r in 0 1 2 3; do
        want=$(i=0; while [ $i -lt 300 ]; do echo "rank $r line $i"; i=$((i + 1)); done)
        [ "$(cat "$D/logs/pbsadopt/attempt-0/rank-$r.log")" = "$want" ] || bad="$bad $r"
    done
    tap_check "every rank's log holds its 300 lines once, in order, across the takeover${bad:+ (not:$bad)}" test -z "$bad"
else
    tap_fail "the PBS run prints before the SIGKILL" "$(tail -5 "$D/adopt.out")"
fi
tap_done
