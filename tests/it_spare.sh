#!/usr/bin/env bash
# Integration: spare nodes (--nnodes N|MIN:MAX, docs/run.md "Spare nodes") with real agents and
# signals. Simulated nodes: 127.0.0.1 to 127.0.0.4 (all this machine), agents started through
# the pbs_tmrsh TEST DOUBLE (tests/pbs/pbs_tmrsh). Each rank prints its torchrun variables; the
# assertions read them from its own log. Shown: SIGKILL of node 0's agent during attempt 0
# with --nnodes 3 and 4 nodes excludes it, the spare takes its place, attempt 1 runs on the 3
# others with MASTER_ADDR the new first node, WORLD_SIZE the same and ranks contiguous; the
# events, `ddptop ls` and `ddptop ls --json` name it and why. --nnodes 2:3 with no spare runs
# attempt 1 on 2 nodes with a smaller WORLD_SIZE. --nnodes 3 with 3 nodes fails, saying MIN.
# A node whose agent cannot start (PBS_TMRSH_FAIL_HOST) fails the preflight: with a spare the
# run launches on the good ones; without --nnodes it is refused as before.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
D=$(mktemp -d /tmp/it_spare.XXXXXX)
# (and the NCCL flight-recorder directories of runs whose agents were killed)
trap 'kill_marker_pids "$D/"; rm -rf "$D" /tmp/ddptop-nccl-s{1,2,3,4,5}' EXIT
export NO_COLOR=1 CUDA_VISIBLE_DEVICES= PBS_TMRSH_LOG=$D/tmrsh.log
export PATH=$PWD/tests/pbs:$PATH
printf '127.0.0.1\n127.0.0.2\n127.0.0.3\n127.0.0.4\n' >"$D/nodes4"
printf '127.0.0.1\n127.0.0.2\n127.0.0.3\n' >"$D/nodes3"

# Attempt 0: local rank 0 of each node writes its agent's pid (the rank's parent is its
# keeper, whose parent is the agent) and every rank waits; later attempts end at once.
cat >"$D/rank.sh" <<'EOF'
#!/bin/sh
echo "env rank=$RANK world=$WORLD_SIZE node=$NODE_RANK nnodes=$NNODES master=$MASTER_ADDR local=$LOCAL_RANK"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
    [ "$LOCAL_RANK" = 0 ] && awk '{print $4}' "/proc/$PPID/stat" >"$(dirname "$0")/$RUN_TAG-agent-n$NODE_RANK.pid"
    sleep 30
fi
exit 0
EOF
chmod +x "$D/rank.sh"

# kill_agent TAG NODE_RANK: SIGKILL that node's agent once its ranks run.
kill_agent() {
    local f="$D/$1-agent-n$2.pid"
    wait_until 60 test -s "$f" || return 1
    kill -KILL "$(cat "$f")"
}
# envs RUN ATTEMPT: the ranks' printed variables of that attempt, sorted by rank.
envs() { cat "$D/logs/$1/attempt-$2"/rank-*.log 2>/dev/null | grep '^env ' | sort -t= -k2 -n; }
show() { sed 's/^/#   /' "$@"; }
# A rendezvous port nothing listens on now (other tests on this machine use 29500): the
# preflight's tcp check would fail node 0 otherwise.
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. --nnodes 3 of 4 nodes, node 0's agent killed: the spare takes its place.
PBS_NODEFILE=$D/nodes4 RUN_TAG=s1 rj_start "$D/s1.out" --pbs --master-port "$(port)" --headless --nnodes 3 --max-restarts 2 \
    --nproc-per-node 2 --env RUN_TAG=s1 --log-dir "$D/logs" --run-id s1 -- "$D/rank.sh"
kill_agent s1 0
rj_wait 90
rj_expect_rc "--nnodes 3, node 0's agent killed: attempt 1 on the 3 others succeeds" 0 || show "$D/s1.out" "$D/s1.out.err"
tap_check "attempt 0 ran on 3 of the 4 nodes (6 ranks)" \
    grep -q 'attempt 0: launching 6 ranks on 3 nodes' "$D/s1.out"
expected=$(printf 'env rank=%d world=6 node=%d nnodes=3 master=127.0.0.2 local=%d\n' 0 0 0 1 0 1 2 1 0 3 1 1 4 2 0 5 2 1)
tap_check "attempt 1: WORLD_SIZE 6, ranks 0-5 contiguous over 3 nodes, MASTER_ADDR the new first node 127.0.0.2" \
    test "$(envs s1 1)" = "$expected" || envs s1 1 | show /dev/stdin
tap_check "the event names the excluded node, why, and the spare" \
    grep -q 'node 127.0.0.1 excluded after this attempt: lost (.*killed by signal 9.*); spare 127.0.0.4 takes its place' "$D/s1.out" ||
    show "$D/s1.out"
tap_check "attempt 1's ranks ran on 127.0.0.2-4 (the ranks' hosts in the output)" \
    sh -c "grep -q 'rank 0 on 127.0.0.2 exited with code 0' $D/s1.out && grep -q 'rank 5 on 127.0.0.4 exited with code 0' $D/s1.out"
tap_check "events.jsonl: attempt 1's launch names 127.0.0.1 excluded with why, and the roles" \
    sh -c "grep '\"kind\":\"launch\"' $D/logs/s1/events.jsonl | tail -1 | grep -q '\"roles\":\\[\"excluded\",\"active\",\"active\",\"active\"\\],\"excluded\":\\[{\"host\":\"127.0.0.1\",\"why\":\"lost ('"
"$DDPTOP" ls --log-dir "$D/logs" >"$D/ls.out" 2>&1
tap_check "ddptop ls: NODES '3 of 4' and the excluded node with why" \
    sh -c "grep -E '^s1 +succeeded +2 +6 +3 of 4 ' $D/ls.out && grep -q 'excluded 127.0.0.1: lost (' $D/ls.out" || show "$D/ls.out"
"$DDPTOP" ls --log-dir "$D/logs" --json >"$D/ls.json" 2>&1
tap_check "ddptop ls --json: active_nodes 3, excluded names 127.0.0.1 and why" \
    /usr/bin/python3 -c "
import json,sys
r=[x for x in json.load(open('$D/ls.json')) if x['run_id']=='s1'][0]
assert r['active_nodes']==3, r
assert len(r['excluded'])==1 and r['excluded'][0].startswith('127.0.0.1: lost ('), r
" || show "$D/ls.json"

# 2. --nnodes 2:3 with 3 nodes: no spare; after the loss attempt 1 runs on 2 nodes.
PBS_NODEFILE=$D/nodes3 RUN_TAG=s2 rj_start "$D/s2.out" --pbs --master-port "$(port)" --headless --nnodes 2:3 --max-restarts 1 \
    --nproc-per-node 2 --env RUN_TAG=s2 --log-dir "$D/logs" --run-id s2 -- "$D/rank.sh"
kill_agent s2 1
rj_wait 90
rj_expect_rc "--nnodes 2:3, a node lost: attempt 1 on 2 nodes succeeds" 0 || show "$D/s2.out" "$D/s2.out.err"
expected=$(printf 'env rank=%d world=4 node=%d nnodes=2 master=127.0.0.1 local=%d\n' 0 0 0 1 0 1 2 1 0 3 1 1)
tap_check "attempt 1: WORLD_SIZE 4 (was 6), NNODES 2, ranks 0-3 contiguous" \
    test "$(envs s2 1)" = "$expected" || envs s2 1 | show /dev/stdin
tap_check "the events say: excluded, no spare left, attempt 1 runs on 2 nodes" \
    sh -c "grep -q 'node 127.0.0.2 excluded after this attempt: lost (.*); no spare left' $D/s2.out &&
           grep -q 'no spare left: attempt 1 runs on 2 nodes, 4 ranks (was 6; --nnodes 2:3)' $D/s2.out" || show "$D/s2.out"
tap_check "attempt 1's ranks 2-3 ran on 127.0.0.3" grep -q 'rank 3 on 127.0.0.3 exited with code 0' "$D/s2.out"

# 3. --nnodes 3 with 3 nodes: below MIN after the loss, the job fails and says so.
PBS_NODEFILE=$D/nodes3 RUN_TAG=s3 rj_start "$D/s3.out" --pbs --master-port "$(port)" --headless --nnodes 3 --max-restarts 2 \
    --env RUN_TAG=s3 --log-dir "$D/logs" --run-id s3 -- "$D/rank.sh"
kill_agent s3 0
rj_wait 90
rj_expect_rc "--nnodes 3 of 3, a node lost: the job fails" 1 || show "$D/s3.out"
tap_check "root cause: the node excluded, 2 nodes left, --nnodes 3:3 needs at least 3; no attempt 1" \
    sh -c "grep -q 'root cause: node 127.0.0.1 excluded (lost (.*)); 2 nodes left, --nnodes 3:3 needs at least 3' $D/s3.out &&
           ! grep -q 'attempt 1: launching' $D/s3.out" || show "$D/s3.out"

# 4. The preflight fails on one node (its agent cannot start): launched on the good ones.
PBS_NODEFILE=$D/nodes4 PBS_TMRSH_FAIL_HOST=127.0.0.2 rj_run "$D/s4.out" --pbs --master-port "$(port)" --headless --nnodes 3 \
    --nproc-per-node 1 --log-dir "$D/logs" --run-id s4 -- sh -c 'echo "env rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR"'
rj_expect_rc "--nnodes 3 of 4, one node fails the preflight: the run launches and succeeds" 0 || show "$D/s4.out" "$D/s4.out.err"
tap_check "the event: 127.0.0.2 excluded by the preflight, spare 127.0.0.4 takes its place" \
    grep -q 'node 127.0.0.2 excluded by the preflight: preflight: .* failed.*; spare 127.0.0.4 takes its place' "$D/s4.out" ||
    show "$D/s4.out"
tap_check "its ranks ran on 127.0.0.1, .3 and .4 (world 3, master 127.0.0.1)" \
    sh -c "grep -q 'rank 1 on 127.0.0.3 exited with code 0' $D/s4.out && grep -q 'rank 2 on 127.0.0.4 exited with code 0' $D/s4.out &&
           grep -q 'env rank=2 world=3 master=127.0.0.1' $D/logs/s4/attempt-0/rank-2.log"
PBS_NODEFILE=$D/nodes4 PBS_TMRSH_FAIL_HOST=127.0.0.2 rj_run "$D/s5.out" --pbs --master-port "$(port)" --headless \
    --log-dir "$D/logs" --run-id s5 -- true
rj_expect_rc "without --nnodes the same preflight failure refuses the launch (exit 3), as before" 3 || show "$D/s5.out"
tap_done
